#pragma once
// Helpers shared by the spec parser and the plan inside dtrain_config.
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "dtrain/config/errors.hpp"
#include "dtrain/config/fields.hpp"
#include "dtrain/config/spec.hpp"

namespace dtrain::config::detail {

// A value as it appears in messages: JSON text, shortened when long.
std::string show(const nlohmann::json& value);
// "a string", "an array", ... for "is a string; expected ...".
std::string kind(const nlohmann::json& value);

// The problems of one spec, each under its JSON pointer (or flag), saying when --set or a flag made
// the value.
struct Collector {
  // A pointer --set or a flag edited: a problem of its value is named by the flag itself
  // ("--max-restarts: -1 is out of range"), or marked "(from --set /batch/global)".
  struct Edit {
    std::string pointer;
    std::string from;    // "--set /batch/global", "--max-restarts"
    bool flag = false;
    std::string origin;  // a flag's PET_ variable, "PET_MAX_RESTARTS=-1" ("" : the command line)
  };
  std::vector<SpecProblem> problems;
  std::vector<Edit> edits;

  void add(std::string path, std::string message) {
    for (const auto& e : edits) {
      bool at_or_under = path == e.pointer || path.rfind(e.pointer + "/", 0) == 0;
      if (e.flag && at_or_under) {
        path = e.from;
        if (!e.origin.empty()) message += " (from " + e.origin + ")";
        break;
      }
      if (at_or_under || e.pointer.rfind(path + "/", 0) == 0) {
        message += " (from " + e.from + ")";
        break;
      }
    }
    problems.push_back({std::move(path), std::move(message)});
  }
};

// The type, range and extra check of one value of field `f` (the field's rule); true when it may
// be applied. Problems go under `path`.
bool check_field(const FieldInfo& f, const nlohmann::json& value, const std::string& path, Collector& c);

// Checks that span several fields (spec_checks.cpp).
void check_combinations(const nlohmann::json& doc, const JobSpec& spec, Collector& c);
// What --standalone does to the spec's endpoint, and its contradictions.
void apply_standalone(JobSpec& spec, const Overrides& o, Collector& c);
// The etcd backend's fields, once the flags are in (--rdzv-backend, --rdzv-endpoint).
void check_etcd(const JobSpec& spec, Collector& c);

}  // namespace dtrain::config::detail
