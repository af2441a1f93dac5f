#pragma once
// Helpers shared by the spec parser and the plan inside dtrain_config.
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "dtrain/config/errors.hpp"
#include "dtrain/config/spec.hpp"

namespace dtrain::config::detail {

// A value as it appears in messages: JSON text, shortened when long.
std::string show(const nlohmann::json& value);
// "a string", "an array", ... for "is a string; expected ...".
std::string kind(const nlohmann::json& value);

// The problems of one spec, each under its JSON pointer (or flag), saying when --set made the value.
struct Collector {
  std::vector<SpecProblem> problems;
  // pointers edited by --set or a flag, with what to name ("--set /batch/global", "--log-dir"),
  // so messages can say where a value came from
  std::vector<std::pair<std::string, std::string>> set_paths;

  void add(const std::string& path, std::string message) {
    for (const auto& [s, from] : set_paths) {
      if (path == s || path.rfind(s + "/", 0) == 0 || s.rfind(path + "/", 0) == 0) {
        message += " (from " + from + ")";
        break;
      }
    }
    problems.push_back({path, std::move(message)});
  }
};

// Checks that span several fields (spec_checks.cpp).
void check_combinations(const nlohmann::json& doc, const JobSpec& spec, Collector& c);
// The command line's overrides (torchrun's flags) applied to the spec, each checked.
void apply_flags(JobSpec& spec, const Overrides& o, Collector& c);
// The etcd backend's fields, once the flags are in (--rdzv-backend, --rdzv-endpoint).
void check_etcd(const JobSpec& spec, Collector& c);

}  // namespace dtrain::config::detail
