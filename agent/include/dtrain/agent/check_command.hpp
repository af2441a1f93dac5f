#pragma once
// A job that cannot start here: the command is not there (127) or not executable (126), the workdir
// is not a directory (2). What the agent refuses before spawning, and `dtrain plan` with it.
#include <optional>
#include <string>

#include "dtrain/config/plan.hpp"

namespace dtrain::agent {

struct Refusal {
  int code = 0;
  std::string message;
};
std::optional<Refusal> check_command(const config::Plan& plan);

}  // namespace dtrain::agent
