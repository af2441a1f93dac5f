#pragma once
// A launch, from the words of its command line to its plan: one function of (launch input,
// environment) that `dtrain plan` and `dtrain launch` both call. The command line only sorts the
// words (each flag's value under its row of flags.hpp, the job file, the program); here the job
// spec is read, the PET_<FLAG> variables fill in what the command line and the spec leave open,
// every value is checked by its target's rule, the program becomes the job's command, and the plan
// is made. Every problem is reported at once (SpecError, exit 2).
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "dtrain/config/flags.hpp"
#include "dtrain/config/plan.hpp"
#include "dtrain/config/spec.hpp"
#include "dtrain/config/streams.hpp"

namespace dtrain::config {

struct FlagValue {
  const FlagRow* row = nullptr;
  std::string text;  // "" for a toggle
};

struct LaunchInput {
  std::vector<FlagValue> flags;        // as the command line gave them
  std::string job_file;                // JOB.json, the positional word ("" when none)
  std::vector<std::string> program;    // the program and its arguments (empty: none)
  bool after_dashdash = false;         // given as `-- PROG ARGS`: a program run as it is
  std::vector<std::string> appended;   // `JOB.json -- ARGS`: appended to the job's command
  bool job_required = false;           // dtrain plan: no built-in demo job
};

// The launch's own settings, beyond the plan: what the agent does with the workers' output.
struct LaunchSettings {
  std::string role = "default";                 // --role: ROLE_NAME
  StreamChoice redirects;                       // -r: these streams go to the log files only
  bool keep_logs = false;                       // -r or -t chose a stream: the log files are kept
  std::optional<std::set<int>> terminal_ranks;  // --ranks, --local-ranks-filter; unset: every rank
  std::string summary_json;                     // --summary-json FILE ("" none)
  int progress = -1;                            // 1 --progress, 0 --no-progress, -1 when a terminal
  bool insecure = false;                        // --insecure: a multi-node job without a token
};

struct Launch {
  Plan plan;
  LaunchSettings settings;
  // One line each, to print once: flags accepted with what dtrain does instead, PET_ variables not
  // used, the plan's warnings.
  std::vector<std::string> notes;
  std::vector<std::string> warnings;
};

Launch resolve_launch(const LaunchInput& input, const Environment& env);

// What the command line does with one flag of a plan's rows (a spec field, a node count, a port):
// for tools and tests that make a plan without a command line. Returns the flag's notes; throws
// SpecError when the value is refused.
std::vector<std::string> set_flag(Overrides& overrides, std::string_view flag, const std::string& text = {});

}  // namespace dtrain::config
