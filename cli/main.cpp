#include <cstring>

#include "app.hpp"
#include "dtrain/agent/agent.hpp"
#include "dtrain/common/sanitizer_defaults.hpp"

int main(int argc, char** argv) {
  // Hidden helpers of `dtrain launch` (worker exec shim, guardian), before any CLI parsing so
  // that each worker start stays cheap.
  if (argc > 1 && argv[1][0] == '_' && argv[1][1] == '_') {
    if (std::strcmp(argv[1], "__exec") == 0) return dtrain::agent::exec_shim_main(argc, argv);
    if (std::strcmp(argv[1], "__guard") == 0) return dtrain::agent::guardian_main(argc, argv);
  }
  return dtrain::cli::run(argc, argv);
}
