// torchrun's PET_<FLAG> variables (torch.distributed.argparse_util): each one whose flag the command
// line does not give is read as that flag, unless the job spec sets the field the flag overrides.
// Precedence, field by field: command line > job spec > PET_* > Slurm, SageMaker, torch env >
// defaults (dtrain-launch(1), TORCHRUN FLAGS).
#include <fmt/format.h>

#include "dtrain/common/text.hpp"
#include "launch_internal.hpp"

namespace dtrain::config::detail {
namespace {

// The first of `fields` the spec sets, or "".
std::string set_in_spec(const std::vector<std::string>& fields, const std::set<std::string>& spec) {
  for (const auto& f : fields)
    if (spec.count(f)) return f;
  return {};
}

// PET_RDZV_CONF without the keys whose field the spec sets.
std::string conf_without(const std::string& conf, const std::set<std::string>& spec, std::vector<std::string>& notes) {
  std::string kept;
  for (const auto& item : text::split(conf, ',')) {
    std::string key = item.substr(0, item.find('='));
    while (!key.empty() && key.back() == ' ') key.pop_back();
    while (!key.empty() && key.front() == ' ') key.erase(0, 1);
    auto ptr = rdzv_conf_pointer(key);
    if (ptr && spec.count(*ptr)) {
      notes.push_back(fmt::format("PET_RDZV_CONF key {} (the job spec sets {}) not used", key, *ptr));
      continue;
    }
    kept += (kept.empty() ? "" : ",") + item;
  }
  return kept;
}

// torchrun's check_env: a switch's variable is an integer, non-zero turns it on.
std::optional<bool> switch_value(const FlagRow& row, const std::string& value, LaunchState& st) {
  long long n = 0;
  try {
    std::size_t pos = 0;
    n = std::stoll(value, &pos);
    if (pos != value.size()) throw std::invalid_argument(value);
  } catch (const std::logic_error&) {
    st.problems.push_back({fmt::format("{}={}", row.pet, value),
                           fmt::format("expected 0 or 1 (torchrun reads it as an integer; non-zero turns {} on)",
                                       flag_name(row))});
    return std::nullopt;
  }
  return n != 0;
}

}  // namespace

void apply_pet(const std::map<std::string, std::string>& env, const std::set<const FlagRow*>& given_rows,
               const std::set<std::string>& spec_pointers, bool has_program, LaunchState& st) {
  std::set<std::string> given_targets;
  for (const FlagRow* r : given_rows) given_targets.insert(r->target);
  for (const auto& row : flag_rows()) {
    if (row.pet == nullptr) continue;
    auto it = env.find(row.pet);
    if (it == env.end() || given_rows.count(&row) || given_targets.count(row.target)) continue;  // the command line wins
    const SettingInfo* s = row.target[0] == '/' ? nullptr : find_setting(row.target);
    if (s != nullptr && s->program_only && !has_program) continue;  // -m, --no-python, --run-path shape a program only
    std::string value = it->second;
    if (std::string field = set_in_spec(overridden_fields(row), spec_pointers); !field.empty()) {
      st.notes.push_back(fmt::format("{}={} not used: the job spec sets {} (command line > job spec > PET_* > "
                                     "environment > defaults)", row.pet, value, dotted_name(field)));
      continue;
    }
    std::string origin = fmt::format("{}={}", row.pet, value);
    if (row.kind == FlagKind::toggle) {
      if (switch_value(row, value, st).value_or(false)) apply_flag(row, "", origin, st);
      continue;
    }
    if (std::string_view(row.target) == "rdzv_conf") value = conf_without(value, spec_pointers, st.notes);
    if (!value.empty()) apply_flag(row, value, origin, st);  // empty: torchrun's default
  }
}

}  // namespace dtrain::config::detail
