#pragma once
// What `dtrain plan` and `dtrain launch` share: the job (a job file, a program, or both), torchrun's
// flags with torchrun's meanings, the spec overrides, and the checks both make before anything runs.
// Precedence, field by field: flags > spec > environment (Slurm, SageMaker, torch env) > defaults.
#include <optional>
#include <string>

#include "command_line.hpp"
#include "dtrain/config/plan.hpp"
#include "dtrain/config/spec.hpp"

namespace CLI {
class App;
}

namespace dtrain::cli {

struct SpecArgs {
  std::string job_file;           // JOB.json as a word ("" when not given)
  std::string spec_file;          // --spec
  config::Overrides overrides;    // filled from the flags
  const ProgramWords* program = nullptr;  // the words after the options (command_line.hpp)
  bool module = false;            // -m: the program is a Python module
  bool no_python = false;         // --no-python: the program runs as it is
  bool run_path = false;          // --run-path
  std::optional<std::string> python;
  bool insecure = false;          // a multi-node job without a token
};

// Adds the JOB positional, the program flags, torchrun's flags and the overrides to `sub`, writing
// into `args` (which must outlive the parse).
void add_spec_options(CLI::App* sub, SpecArgs& args);

// The plan of what the command line asks for: a job file, a program (with a job file: its command
// replaced), or, for a bare launch (!job_required), the built-in demo job. Discovers node identity
// from `env` and prints the plan's warnings. Throws config::SpecError (exit 2) listing every problem.
config::Plan load_plan(const SpecArgs& args, bool job_required, const config::Environment& env);
config::Plan load_plan(const SpecArgs& args, bool job_required);

// What `dtrain launch` would refuse before starting anything, as `dtrain plan` reports it (same
// message, same exit status): a multi-node job without a token, a command that is not there, a
// workdir that is not a directory. Throws (ConfigError 2, ...) or returns the status of a command
// that cannot run (127, 126) after printing its message; 0 when it may run.
int preflight(const config::Plan& plan, bool insecure);

}  // namespace dtrain::cli
