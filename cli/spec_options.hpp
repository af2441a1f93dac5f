#pragma once
// The job-spec options shared by `dtrain plan` and `dtrain launch`: the job file positional and
// the overrides --nodes, --node-rank, --nproc-per-node, --rdzv, --token-file and --set.
// Precedence, field by field: flags > spec > environment (Slurm, SageMaker, torch env) > defaults.
#include <string>

#include "dtrain/config/plan.hpp"
#include "dtrain/config/spec.hpp"

namespace CLI {
class App;
}

namespace dtrain::cli {

struct SpecArgs {
  std::string job_file;          // "" when not given (launch then runs config::default_spec())
  config::Overrides overrides;   // filled from the flags
};

// Adds the positional JOB (always optional to CLI11; load_plan enforces job_required) and the
// override flags to `sub`, writing into `args` (which must outlive the parse).
void add_spec_options(CLI::App* sub, SpecArgs& args);

// Loads the job file (or the embedded default_spec() when none is given and !job_required),
// applies the overrides, discovers node identity from the current environment and makes the plan.
// Throws config::SpecError (a ConfigError: exit 2) listing every problem.
config::Plan load_plan(const SpecArgs& args, bool job_required);

// The same, with an explicit environment snapshot (tests, or a caller that already has one).
config::Plan load_plan(const SpecArgs& args, bool job_required, const config::Environment& env);

}  // namespace dtrain::cli
