#include <cstring>

#include "app.hpp"
#include "dtrain/agent/agent.hpp"
#include "dtrain/common/sanitizer_defaults.hpp"

int main(int argc, char** argv) {
  // The hidden guardian of `dtrain launch` (where no dtrain-shim is installed), before any CLI
  // parsing.
  if (argc > 1 && std::strcmp(argv[1], "__guard") == 0) return dtrain::agent::guardian_main(argc, argv);
  return dtrain::cli::run(argc, argv);
}
