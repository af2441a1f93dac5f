// Job spec v1: JSON text -> (--set edits) -> validation against the field registry -> JobSpec.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/text.hpp"
#include "dtrain/config/fields.hpp"
#include "dtrain/config/spec.hpp"
#include "spec_internal.hpp"

namespace dtrain::config {
namespace detail {

std::string show(const nlohmann::json& value) {
  std::string s = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

std::string kind(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::object: return "an object";
    case nlohmann::json::value_t::array: return "an array";
    case nlohmann::json::value_t::string: return "a string";
    case nlohmann::json::value_t::boolean: return "a boolean";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return "an integer";
    case nlohmann::json::value_t::number_float: return "a fractional number";
    default: return "not a JSON value";
  }
}

}  // namespace detail

namespace {

using json = nlohmann::json;
using detail::kind;
using detail::show;
using detail::Collector;
using detail::apply_standalone;
using detail::check_combinations;
using detail::check_etcd;

std::string escape_token(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

// How deep arrays and objects may nest: a job spec needs four levels; the parser, the checks and
// the messages recurse, so a document nested 100,000 deep must be refused before it is parsed.
constexpr std::size_t kMaxDepth = 64;

// The line where JSON text first nests deeper than kMaxDepth, or 0 (strings are skipped).
std::size_t too_deep_at(std::string_view text) {
  std::size_t depth = 0, line = 1;
  bool in_string = false, escaped = false;
  for (char ch : text) {
    if (ch == '\n') ++line;
    if (in_string) {
      if (escaped) escaped = false;
      else if (ch == '\\') escaped = true;
      else if (ch == '"') in_string = false;
    } else if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      if (++depth > kMaxDepth) return line;
    } else if ((ch == ']' || ch == '}') && depth > 0) {
      --depth;
    }
  }
  return 0;
}

// "[json.exception.out_of_range.406] number overflow parsing '1e400'" -> from "number".
std::string library_text(const std::string& what) {
  auto pos = what.find("] ");
  return pos == std::string::npos ? what : what.substr(pos + 2);
}

// Parses JSON text, reporting duplicate keys (the parser callback sees every key in order).
json parse_text(const std::string& text, Collector& c) {
  if (std::size_t line = too_deep_at(text)) {
    c.add("", fmt::format("invalid JSON at line {}: arrays and objects nest deeper than {} levels; a job spec "
                          "needs only a few (see dtrain-job(5))", line, kMaxDepth));
    return json();
  }
  struct Frame {
    bool array = false;
    std::size_t index = 0;
    std::string key;
    std::unordered_set<std::string> keys;
  };
  std::vector<Frame> stack;
  auto child_path = [&] {
    std::string out;
    for (const auto& f : stack) out += "/" + (f.array ? std::to_string(f.index) : escape_token(f.key));
    return out;
  };
  json::parser_callback_t cb = [&](int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start: stack.push_back(Frame{}); break;
      case json::parse_event_t::array_start: stack.push_back(Frame{true, 0, {}, {}}); break;
      case json::parse_event_t::key: {
        auto& f = stack.back();
        f.key = parsed.get<std::string>();
        if (!f.keys.insert(f.key).second)
          c.add(child_path(), "duplicate key; each key may appear once in an object (the last one would win)");
        break;
      }
      case json::parse_event_t::value:
        if (!stack.empty() && stack.back().array) ++stack.back().index;
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        stack.pop_back();
        if (!stack.empty() && stack.back().array) ++stack.back().index;
        break;
    }
    return true;
  };
  try {
    return json::parse(text, cb);
  } catch (const json::parse_error& e) {
    std::string msg = e.what();
    // "[json.exception.parse_error.101] parse error at line 3, column 5: syntax error ..." -> from "line"
    if (auto pos = msg.find("at line "); pos != std::string::npos) msg = "invalid JSON " + msg.substr(pos);
    else msg = "invalid JSON: " + library_text(msg);
    c.problems.clear();  // duplicates seen before a syntax error are noise
    c.add("", msg);
    return json();
  } catch (const json::exception& e) {  // a number too large for a double: 1e400
    c.problems.clear();
    c.add("", fmt::format("invalid JSON: {} (numbers must fit a 64-bit float)", library_text(e.what())));
    return json();
  }
}

// One value into the document at `edit.pointer`, remembered for messages.
void set_at(json& doc, const Collector::Edit& edit, json value, const std::string& where, Collector& c) {
  try {
    json::json_pointer jp(edit.pointer);
    if (!doc.is_object()) doc = json::object();
    doc[jp] = std::move(value);
    c.edits.push_back(edit);
  } catch (const json::exception& e) {
    std::string what = e.what();
    if (auto pos = what.find("] "); pos != std::string::npos) what = what.substr(pos + 2);
    c.add(where, fmt::format("cannot set {}: {}", edit.pointer, what));
  }
}

// "/batch/global=512" into the document; the value is JSON when it parses as JSON, else a string.
void apply_set(json& doc, const std::string& assignment, Collector& c) {
  auto eq = assignment.find('=');
  if (eq == std::string::npos || assignment.empty() || assignment[0] != '/') {
    c.add("--set", fmt::format("'{}' is not /json/pointer=value, e.g. --set /batch/global=512", assignment));
    return;
  }
  std::string ptr = assignment.substr(0, eq);
  std::string raw = assignment.substr(eq + 1);
  json value = raw;  // text that does not parse as JSON (or nests too deep) stays a string
  try {
    if (too_deep_at(raw) == 0) value = json::parse(raw);
  } catch (const json::exception&) {
  }
  set_at(doc, {ptr, "--set " + ptr, false, ""}, std::move(value), "--set", c);
}

// A spec field a flag sets (--log-dir, --rdzv-conf timeout=60): its value is JSON already.
void apply_flag_set(json& doc, const FlagSet& f, Collector& c) {
  set_at(doc, {f.pointer, f.flag, true, f.origin}, json::parse(f.value), f.flag, c);
}

// A NUL inside a string would cut it where the workers see it (argv, environment, paths): every
// string and key of the document is refused with its path instead.
void check_nul(const json& v, const std::string& path, Collector& c) {
  auto nul = [&](const std::string& s, const std::string& at, const char* what) {
    if (s.find('\0') != std::string::npos)
      c.add(at.empty() ? "/" : at, fmt::format("{} holds a NUL character (\\u0000), which would cut it short; remove it",
                                              what));
  };
  if (v.is_string()) {
    nul(v.get_ref<const std::string&>(), path, "the string");
  } else if (v.is_object()) {
    for (const auto& [key, x] : v.items()) {
      std::string shown;  // the key as a path, its NULs written as JSON writes them
      for (char ch : escape_token(key)) shown += ch == '\0' ? std::string("\\u0000") : std::string(1, ch);
      nul(key, path + "/" + shown, "the key");
      check_nul(x, path + "/" + shown, c);
    }
  } else if (v.is_array()) {
    for (std::size_t i = 0; i < v.size(); ++i) check_nul(v[i], path + "/" + std::to_string(i), c);
  }
}

std::vector<std::string> child_names(const std::string& parent) {
  std::vector<std::string> out;
  for (const auto& f : spec_fields()) {
    std::string_view p = f.path;
    auto slash = p.rfind('/');
    if (p.substr(0, slash) == parent) out.emplace_back(p.substr(slash + 1));
  }
  return out;
}

bool check_range(const FieldInfo& f, const json& v, const std::string& path, Collector& c) {
  double x = v.get<double>();
  bool ok = std::isfinite(x) && (f.min_exclusive ? x > f.min : x >= f.min) && x <= f.max;
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(f.max)) ok = false;
  if (!ok) {
    if (f.path == std::string_view("/version"))
      c.add(path, fmt::format("{} is not supported; this dtrain reads job spec version 1", show(v)));
    else
      c.add(path, fmt::format("{} is out of range; expected {}", show(v), expectation(f)));
  }
  return ok;
}

// {"min": A, "max": B}: exactly those two integers, each in the field's range, A <= B.
bool check_node_range(const FieldInfo& f, const json& v, const std::string& path, Collector& c) {
  bool ok = true;
  for (const auto& [key, x] : v.items())
    if (key != "min" && key != "max") {
      c.add(path + "/" + escape_token(key), "unknown key; an elastic node count has only \"min\" and \"max\"");
      ok = false;
    }
  for (const char* key : {"min", "max"}) {
    std::string at = path + "/" + key;
    if (!v.contains(key)) {
      c.add(at, fmt::format("missing; an elastic node count needs both, e.g. {{\"min\": 2, \"max\": 4}}"));
      ok = false;
    } else if (!v.at(key).is_number_integer()) {
      c.add(at, fmt::format("{} is {}; expected an integer", show(v.at(key)), kind(v.at(key))));
      ok = false;
    } else {
      ok = check_range(f, v.at(key), at, c) && ok;
    }
  }
  if (ok && v.at("min").get<double>() > v.at("max").get<double>()) {
    c.add(path, fmt::format("min {} is more than max {}; expected min <= max", show(v.at("min")), show(v.at("max"))));
    ok = false;
  }
  return ok;
}

// Type and range check of one value; true when it may be applied.
bool check_value(const FieldInfo& f, const json& v, const std::string& path, Collector& c) {
  auto wrong = [&] {
    c.add(path, fmt::format("{} is {}; expected {}", show(v), kind(v), expectation(f)));
    return false;
  };
  switch (f.type) {
    case FieldType::object:
      if (!v.is_object()) return wrong();
      return true;
    case FieldType::integer:
      if (!v.is_number_integer()) return wrong();
      return check_range(f, v, path, c);
    case FieldType::number:
      if (!v.is_number()) return wrong();
      return check_range(f, v, path, c);
    case FieldType::boolean:
      if (!v.is_boolean()) return wrong();
      return true;
    case FieldType::string:
      if (!v.is_string()) return wrong();
      if (v.get_ref<const std::string&>().empty()) {
        c.add(path, fmt::format("\"\" is empty; expected {}", expectation(f)));
        return false;
      }
      return true;
    case FieldType::string_list: {
      if (!v.is_array()) return wrong();
      bool ok = true;
      for (std::size_t i = 0; i < v.size(); ++i) {
        if (!v[i].is_string()) {
          c.add(fmt::format("{}/{}", path, i), fmt::format("{} is {}; every element must be a string, e.g. \"{}\"",
                                                           show(v[i]), kind(v[i]), v[i].is_primitive() ? show(v[i]) : "arg"));
          ok = false;
        }
      }
      return ok;
    }
    case FieldType::string_map:
      if (!v.is_object()) return wrong();
      return true;  // values are checked by the field's own check
    case FieldType::gpus:
      if (v.is_string()) {
        if (v.get_ref<const std::string&>() == "auto") return true;
        c.add(path, fmt::format("{} is not a count; expected {}", show(v), expectation(f)));
        return false;
      }
      if (!v.is_number_integer()) return wrong();
      if (v.get<double>() == 0) {
        c.add(path, fmt::format("0 GPUs is out of range; expected {} (for CPU workers set "
                                "/cluster/procs_per_instance instead)", expectation(f)));
        return false;
      }
      return check_range(f, v, path, c);
    case FieldType::nodes:
      if (v.is_object()) return check_node_range(f, v, path, c);
      if (!v.is_number_integer()) return wrong();
      return check_range(f, v, path, c);
  }
  return false;
}

}  // namespace

bool detail::check_field(const FieldInfo& f, const json& value, const std::string& path, Collector& c) {
  if (!check_value(f, value, path, c)) return false;
  if (!f.check) return true;
  std::vector<SpecProblem> extra;
  f.check(value, path, extra);
  for (auto& p : extra) c.add(p.path, std::move(p.message));
  return extra.empty();
}

namespace {

void walk(const json& obj, const std::string& parent, JobSpec& spec, Collector& c) {
  std::vector<std::string> names = child_names(parent);
  for (const auto& [key, value] : obj.items()) {
    std::string path = parent + "/" + escape_token(key);
    const FieldInfo* f = find_field(path);
    if (f == nullptr) {
      std::string where = parent.empty() ? "at the top level" : "in " + parent;
      if (auto near = text::closest(key, names))
        c.add(path, fmt::format("unknown key; did you mean \"{}\"?", *near));
      else
        c.add(path, fmt::format("unknown key {}; expected one of: {}", where, text::join(names, ", ")));
      continue;
    }
    if (!detail::check_field(*f, value, path, c)) continue;
    if (f->apply) f->apply(spec, value);
    if (f->type == FieldType::object) walk(value, path, spec, c);
  }
  for (const auto& f : spec_fields()) {
    std::string_view p = f.path;
    if (!f.required || p.substr(0, p.rfind('/')) != parent) continue;
    if (!obj.contains(std::string(p.substr(p.rfind('/') + 1))))
      c.add(f.path, parent.empty() ? fmt::format("missing; every job needs it ({}), e.g. \"command\": [\"python3\", \"train.py\"]", f.doc)
                                   : fmt::format("missing; {} needs it ({})", parent, f.doc));
  }
}

std::string display_source(const std::filesystem::path& source) {
  return source.empty() ? std::string("job spec") : source.string();
}

}  // namespace

JobSpec load_spec_text(const std::string& json_text, const Overrides& overrides, const std::filesystem::path& source) {
  Collector c;
  if (json_text.find_first_not_of(" \t\r\n") == std::string::npos)
    throw SpecError(display_source(source),
                    {{"", "the job spec is empty; expected a JSON object, e.g. {\"command\": [\"python3\", \"train.py\"]}"}});
  json doc = parse_text(json_text, c);
  JobSpec spec;
  spec.source = source;
  if (!c.problems.empty() && doc.is_null()) throw SpecError(display_source(source), c.problems);
  for (const auto& s : overrides.sets) apply_set(doc, s, c);
  for (const auto& f : overrides.flag_sets) apply_flag_set(doc, f, c);
  if (overrides.command && doc.is_object()) doc["command"] = *overrides.command;
  std::size_t before_nul = c.problems.size();
  check_nul(doc, "", c);
  if (c.problems.size() != before_nul) throw SpecError(display_source(source), c.problems);
  if (!doc.is_object()) {
    c.add("/", fmt::format("the job spec is {}; expected a JSON object, e.g. {{\"command\": [\"python3\", \"train.py\"]}}",
                           kind(doc)));
  } else {
    walk(doc, "", spec, c);
    check_combinations(doc, spec, c);
  }
  apply_standalone(spec, overrides, c);
  check_etcd(spec, c);
  if (!c.problems.empty()) throw SpecError(display_source(source), c.problems);
  if (spec.name.empty()) {
    std::string base = overrides.default_name.value_or(std::filesystem::path(spec.command.front()).filename().string());
    std::string clean;
    for (char ch : base)
      clean += ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
                ch == '-' || ch == '.')
                   ? ch
                   : '_';
    while (!clean.empty() && (clean.front() == '.' || clean.front() == '-')) clean.erase(0, 1);
    spec.name = clean.empty() ? "job" : clean.substr(0, 64);
  }
  return spec;
}

JobSpec command_spec(const Overrides& overrides) {
  try {
    return load_spec_text(R"({"version": 1})", overrides);
  } catch (const SpecError& e) {
    throw SpecError(kCommandLine, e.problems());
  }
}

JobSpec load_spec_file(const std::filesystem::path& file, const Overrides& overrides) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec))
    throw ConfigError(fmt::format("job file {}: no such file; give the path of a job spec (see dtrain-job(5))", file.string()));
  if (std::filesystem::is_directory(file, ec))
    throw ConfigError(fmt::format("job file {}: is a directory; give the path of a job spec JSON file", file.string()));
  std::ifstream in(file, std::ios::binary);
  if (!in.is_open())
    throw ConfigError(fmt::format("job file {}: cannot open: {}", file.string(), errno_text(errno)));
  std::ostringstream text;
  if (in.peek() != std::ifstream::traits_type::eof()) text << in.rdbuf();
  if (in.bad()) throw ConfigError(fmt::format("job file {}: cannot read: {}", file.string(), errno_text(errno)));
  return load_spec_text(text.str(), overrides, file);
}

}  // namespace dtrain::config
