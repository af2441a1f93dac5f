#pragma once
// Helpers shared by the spec parser and the plan inside dtrain_config.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dtrain/config/errors.hpp"

namespace dtrain::config::detail {

// A value as it appears in messages: JSON text, shortened when long.
std::string show(const nlohmann::json& value);
// "a string", "an array", ... for "is a string; expected ...".
std::string kind(const nlohmann::json& value);

}  // namespace dtrain::config::detail
