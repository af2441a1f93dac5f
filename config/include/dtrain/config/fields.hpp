#pragma once
// The one registry of job spec fields: JSON path, type, default, one-line doc, limits and how the
// validated value lands in JobSpec. The parser validates against it and a docs test checks that
// every field is in man/dtrain-job.5, so the two cannot drift apart.
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "dtrain/config/errors.hpp"
#include "dtrain/config/spec.hpp"

namespace dtrain::config {

enum class FieldType {
  object,       // a section: {"cluster": {...}}
  integer,      // whole number within [min, max]
  number,       // any number within [min, max] (seconds)
  boolean,
  string,       // non-empty string
  string_list,  // non-empty array of strings
  string_map,   // object of string values
  gpus,         // "auto" or an integer within [min, max]
  nodes,        // an integer within [min, max], or {"min": A, "max": B} with min <= A <= B <= max
};

// How the type reads in messages and in the man page: "integer", "array of strings", ...
const char* type_name(FieldType type);

struct FieldInfo {
  const char* path;          // JSON pointer, e.g. "/cluster/instances"
  FieldType type;
  const char* default_text;  // as man/dtrain-job.5 writes it ("1", "\"auto\"", "unset", "required")
  const char* doc;           // one line
  double min = 0;            // integer/number/gpus: smallest allowed value
  double max = 0;            // largest allowed value
  bool min_exclusive = false;  // value must be > min (e.g. a heartbeat period)
  bool required = false;
  // Extra checks on a value of the right type (e.g. HOST:PORT syntax); appends problems.
  void (*check)(const nlohmann::json& value, const std::string& path, std::vector<SpecProblem>& out) = nullptr;
  // Stores a validated value into the spec.
  void (*apply)(JobSpec& spec, const nlohmann::json& value) = nullptr;
};

std::span<const FieldInfo> spec_fields();
const FieldInfo* find_field(std::string_view path);
// "/cluster/instances" -> "cluster.instances" (the spelling of the man page).
std::string dotted_name(std::string_view path);
// What a field accepts, for messages: "an integer >= 1", "\"auto\" or an integer from 1 to 1024".
std::string expectation(const FieldInfo& field);

}  // namespace dtrain::config
