#pragma once
// Every flag of torchrun (PyTorch 1.13 and 2.x) that `dtrain launch` and `dtrain plan` accept: the
// table that PET_<FLAG> variables, the man pages' tables and their test read, and the options
// themselves, each mapped to what dtrain does or accepted with a note saying what it does instead.
#include <span>

#include "spec_options.hpp"

namespace CLI {
class App;
}

namespace dtrain::cli {

struct TorchrunFlag {
  const char* name;        // dtrain's spelling, "--nproc-per-node" (torchrun's "--nproc_per_node" works too)
  const char* short_name;  // "-r", or nullptr
  const char* pet;         // "PET_NPROC_PER_NODE", or nullptr where torchrun reads no variable
  bool takes_value;        // false: a switch (PET_X=1 turns it on, as torchrun's check_env)
  const char* spec_paths;  // spec fields it overrides, space separated ("" none): a job spec that sets one
                           // wins over the PET_ variable
  bool program;            // -m, --no-python, --run-path: shape the program, read from PET_ only with one
};

std::span<const TorchrunFlag> torchrun_flags();

// torchrun's flags (nodes, workers, rendezvous, restarts, logs, ...) on `sub`, into `args`.
void add_torchrun_options(CLI::App* sub, SpecArgs& args);
// launch's output and supervision options (--grace, --tag, --ranks, --summary-json, ...).
void add_run_options(CLI::App* sub, SpecArgs& args);

}  // namespace dtrain::cli
