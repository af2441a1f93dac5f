#pragma once
// What `dtrain plan` and `dtrain launch` share: the job (a job file, a program, or both), torchrun's
// flags with torchrun's meanings, the spec overrides, and the checks both make before anything runs.
// Precedence, field by field: flags > spec > environment (Slurm, SageMaker, torch env) > defaults.
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "command_line.hpp"
#include "dtrain/agent/agent.hpp"
#include "dtrain/config/plan.hpp"
#include "dtrain/config/spec.hpp"

namespace CLI {
class App;
}

namespace dtrain::cli {

// What launch does with the workers' output and the terminal (plan checks them the same way).
struct RunArgs {
  std::string role = "default";     // --role: ROLE_NAME
  std::string tee, redirects;       // -t/--tee, -r/--redirects: 0-3 or LOCAL_RANK:N,...
  std::string ranks;                // --ranks: global ranks whose output reaches the terminal
  std::string local_ranks_filter;   // --local-ranks-filter: the same by local rank (torchrun's)
  std::string summary_json;         // --summary-json FILE
  bool progress = false, no_progress = false;
};

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
  RunArgs run;                    // launch's output options (plan accepts and checks them too)
  // torchrun flags accepted with what dtrain does instead, one line each, printed once by load_plan
  std::vector<std::string> notes;
};

// Adds the JOB positional, the program flags, torchrun's flags and the overrides to `sub`, writing
// into `args` (which must outlive the parse).
void add_spec_options(CLI::App* sub, SpecArgs& args);

// The plan of what the command line asks for: a job file, a program (with a job file: its command
// replaced), or, for a bare launch (!job_required), the built-in demo job. Discovers node identity
// from `env` and prints the plan's warnings. Throws config::SpecError (exit 2) listing every problem.
config::Plan load_plan(const SpecArgs& args, bool job_required, const config::Environment& env);
config::Plan load_plan(const SpecArgs& args, bool job_required);

// The terminal's ranks of --ranks and --local-ranks-filter (unset: all), checked against the plan;
// ConfigError for a list that does not parse.
std::optional<std::set<int>> terminal_ranks(const RunArgs& run, const config::Plan& plan);
// -r/--redirects, -t/--tee: ConfigError naming the flag when the text is not 0-3 or LOCAL_RANK:N,...
agent::StreamChoice parse_streams(const std::string& text, const char* flag);

// What `dtrain launch` would refuse before starting anything, as `dtrain plan` reports it (same
// message, same exit status): a multi-node job without a token, a command that is not there, a
// workdir that is not a directory. Throws (ConfigError 2, ...) or returns the status of a command
// that cannot run (127, 126) after printing its message; 0 when it may run.
int preflight(const config::Plan& plan, bool insecure);

}  // namespace dtrain::cli
