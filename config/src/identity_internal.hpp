#pragma once
#include <vector>

#include "dtrain/config/errors.hpp"
#include "dtrain/config/plan.hpp"

namespace dtrain::config::detail {

// discover_identity without throwing: problems are appended so make_plan reports them together
// with its own.
NodeIdentity discover_identity(const JobSpec& spec, const Overrides& overrides, const Environment& env,
                               std::vector<SpecProblem>& problems);

}  // namespace dtrain::config::detail
