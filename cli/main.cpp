#include <cstring>

#include "app.hpp"
#include "dtrain/agent/agent.hpp"
#include "dtrain/common/sanitizer_defaults.hpp"
#include "dtrain/remote/head_link.hpp"

int main(int argc, char** argv) {
  // The hidden guardian of `dtrain launch` (where no dtrain-shim is installed), before any CLI
  // parsing.
  if (argc > 1 && std::strcmp(argv[1], "__guard") == 0) return dtrain::agent::guardian_main(argc, argv);
  // What the head of a launch over several hosts runs on each (remote/head_link.hpp).
  if (argc > 1 && std::strcmp(argv[1], "__remote") == 0) return dtrain::remote::node_main(argc, argv, dtrain::cli::run);
  return dtrain::cli::run(argc, argv);
}
