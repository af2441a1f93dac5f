#pragma once
// The names of the worker environment contract (dtrain-launch(1), ENVIRONMENT): the agent's env
// builder sets only names from this list, and a job spec's `env` section may not set a reserved one
// (dtrain always sets it, so a value there would be silently replaced).
#include <span>
#include <string_view>

namespace dtrain::worker_env {

struct Var {
  std::string_view name;
  bool reserved;  // false: a default the spec's env (or the agent's environment) may override
};

std::span<const Var> variables();
// The entry for `name`, or nullptr when dtrain does not set it.
const Var* find(std::string_view name);
inline bool is_reserved(std::string_view name) {
  const Var* v = find(name);
  return v != nullptr && v->reserved;
}

}  // namespace dtrain::worker_env
