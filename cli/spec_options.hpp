#pragma once
// What `dtrain plan` and `dtrain launch` share: their options, made from the rows of
// dtrain/config/flags.hpp (torchrun's flags, mpirun's words, dtrain's own), the words they sort into
// config's LaunchInput, and the checks both make before anything runs. config::resolve_launch does
// the rest: the spec, the PET_ variables, the program and the plan.
#include "command_line.hpp"
#include "dtrain/config/launch.hpp"

namespace CLI {
class App;
}

namespace dtrain::cli {

struct LaunchArgs {
  config::LaunchInput input;             // filled by the options' callbacks
  const ProgramWords* words = nullptr;   // the words after the options (command_line.hpp)
};

// The JOB positional and an option per row of config::flag_rows() on `sub`, writing into `args`
// (which must outlive the parse).
void add_launch_options(CLI::App* sub, LaunchArgs& args);

// The launch the command line asks for (config::resolve_launch over this machine's environment);
// prints its notes and warnings. `job_required`: dtrain plan, no built-in demo job.
config::Launch resolve(LaunchArgs& args, bool job_required);

// What `dtrain launch` would refuse before starting anything, as `dtrain plan` reports it (same
// message, same exit status): a multi-node job without a token, a command that is not there, a
// workdir that is not a directory. Throws (ConfigError 2, ...) or returns the status of a command
// that cannot run (127, 126) after printing its message; 0 when it may run.
int preflight(const config::Launch& launch);

}  // namespace dtrain::cli
