#pragma once
// The registry of DTRAIN_* environment parameters a user may set (NCCL_PARAM style): one table.
// Values are read from the environment at each call (callers read them once, at setup, never on a
// hot path), so a test or an agent may change the environment between calls. The same table feeds
// `dtrain env`, --help and the man pages' ENVIRONMENT sections (a test checks that every entry is
// documented). Variables that `dtrain launch` sets for
// its workers are the env contract (worker_env.hpp), listed in man/dtrain-launch.1, not here.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace dtrain {

struct Param {
  const char* name;           // DTRAIN_...
  const char* default_value;  // as text; "" when unset means "not set"
  const char* help;           // one line
};

std::span<const Param> params();
const Param* find_param(std::string_view name);

// Value from the environment, else the registered default. The name must be registered.
std::string param_string(std::string_view name);
// Integer/float value; a malformed value throws ConfigError naming the variable.
std::int64_t param_int(std::string_view name);
double param_double(std::string_view name);

}  // namespace dtrain
