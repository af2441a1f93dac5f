// PET_<FLAG> into flags (pet_env.hpp).
#include "pet_env.hpp"

#include <CLI/CLI.hpp>

#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/text.hpp"
#include "dtrain/config/fields.hpp"
#include "dtrain/config/spec.hpp"
#include "torchrun_flags.hpp"

namespace dtrain::cli {
namespace {

using json = nlohmann::json;

void collect(const json& v, const std::string& path, std::set<std::string>& out) {
  if (!path.empty()) out.insert(path);
  if (v.is_object())
    for (const auto& [k, x] : v.items()) collect(x, path + "/" + k, out);
}

// The JSON pointers the job file (and --set) give a value; a file that does not parse gives none
// (loading it reports why).
std::set<std::string> spec_pointers(const ProgramWords& words) {
  std::set<std::string> out;
  if (!words.job_file.empty()) {
    std::ifstream in(words.job_file);
    std::stringstream text;
    text << in.rdbuf();
    try {
      collect(json::parse(text.str()), "", out);
    } catch (const json::exception&) {
    }
  }
  for (const auto& s : words.sets) out.insert(s.substr(0, s.find('=')));
  return out;
}

// The first of `paths` (space separated) the spec sets, or "".
std::string set_in_spec(const std::string& paths, const std::set<std::string>& given) {
  for (const auto& p : text::split(paths, ' '))
    if (!p.empty() && given.count(p)) return p;
  return {};
}

// PET_RDZV_CONF without the keys whose field the spec sets.
std::string conf_without(const std::string& conf, const std::set<std::string>& given, std::vector<std::string>& dropped) {
  std::string kept;
  for (const auto& item : text::split(conf, ',')) {
    std::string key = item.substr(0, item.find('='));
    while (!key.empty() && key.back() == ' ') key.pop_back();
    while (!key.empty() && key.front() == ' ') key.erase(0, 1);
    auto ptr = config::rdzv_conf_pointer(key);
    if (ptr && given.count(*ptr)) {
      dropped.push_back(fmt::format("{} (the job spec sets {})", key, *ptr));
      continue;
    }
    kept += (kept.empty() ? "" : ",") + item;
  }
  return kept;
}

}  // namespace

PetResult pet_arguments(const CLI::App& sub, const std::vector<std::string>& cli, const ProgramWords& words,
                        const std::map<std::string, std::string>& env) {
  PetResult r;
  std::set<const CLI::Option*> given;
  for (const auto& a : cli)
    if (a.size() > 1 && a[0] == '-')
      if (const CLI::Option* o = sub.get_option_no_throw(a.substr(0, a.find('='))); o != nullptr) given.insert(o);
  std::set<std::string> pointers;
  bool pointers_read = false;
  for (const auto& f : torchrun_flags()) {
    if (f.pet == nullptr) continue;
    auto it = env.find(f.pet);
    if (it == env.end()) continue;
    const CLI::Option* opt = sub.get_option_no_throw(f.name);
    if (opt == nullptr || given.count(opt)) continue;  // the command line wins
    if (f.program && words.words.empty()) continue;    // -m, --no-python, --run-path shape a program only
    if (!pointers_read) pointers = spec_pointers(words), pointers_read = true;
    std::string value = it->second;
    if (std::string field = set_in_spec(f.spec_paths, pointers); !field.empty()) {
      r.notes.push_back(fmt::format("{}={} not used: the job spec sets {} (command line > job spec > PET_* > "
                                    "environment > defaults)", f.pet, value, config::dotted_name(field)));
      continue;
    }
    if (!f.takes_value) {  // torchrun's check_env: an integer, non-zero turns the switch on
      long long n = 0;
      try {
        std::size_t pos = 0;
        n = std::stoll(value, &pos);
        if (pos != value.size()) throw std::invalid_argument(value);
      } catch (const std::logic_error&) {
        throw ConfigError(fmt::format("{}={}: expected 0 or 1 (torchrun reads it as an integer; non-zero turns {} on)",
                                      f.pet, value, f.name));
      }
      if (n == 0) continue;
      r.args.emplace_back(f.name);
    } else {
      if (std::string_view(f.name) == "--rdzv-conf") {
        std::vector<std::string> dropped;
        value = conf_without(value, pointers, dropped);
        for (const auto& d : dropped) r.notes.push_back(fmt::format("{} key {} not used", f.pet, d));
        if (value.empty()) continue;
      }
      if (value.empty()) continue;  // torchrun's empty default
      r.args.push_back(std::string(f.name) + "=" + value);
    }
    r.used.push_back({f.pet, it->second, f.name});
  }
  return r;
}

}  // namespace dtrain::cli
