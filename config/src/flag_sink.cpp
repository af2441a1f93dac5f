// The one setter every flag value goes through (FlagSink, launch_internal.hpp): read by its
// target's type, refused when another flag already said otherwise, checked by its target's rule
// (a spec field's when the spec is loaded, a launch setting's at once), then applied.
#include <fmt/format.h>

#include "launch_internal.hpp"
#include "spec_internal.hpp"

namespace dtrain::config::detail {
namespace {

using json = nlohmann::json;

// "--max-restarts 3", "--tag": how a flag and its value read in messages.
std::string said(const FlagRow& row, const json& v) {
  if (row.kind == FlagKind::toggle) return flag_name(row);
  return fmt::format("{} {}", flag_name(row), v.is_string() ? v.get<std::string>() : v.dump());
}

// Two flags saying different things about one target (-ppn 2 --nproc-per-node 4, --tag --no-tag).
bool contradicts(FlagSink& sink, const std::string& target, const json& v) {
  auto [it, fresh] = sink.state.given.try_emplace(target, &sink.row, v);
  if (fresh || it->second.first == &sink.row) {
    it->second = {&sink.row, v};
    return false;
  }
  if (it->second.second == v) return false;
  sink.problem(fmt::format("{} says otherwise; give one of them", said(*it->second.first, it->second.second)));
  return true;
}

}  // namespace

void FlagSink::problem(std::string message, const std::string& what) {
  if (!origin.empty()) message += " (from " + origin + ")";
  state.problems.push_back({what.empty() ? flag() : what, std::move(message)});
}

std::optional<json> FlagSink::typed(const FieldInfo* rule, const std::string& text, const std::string& what) {
  auto number = [&]() -> std::optional<json> {
    json v = json::parse(text, nullptr, false);
    if (!v.is_discarded() && v.is_number()) return v;
    problem(fmt::format("'{}' is not a number; expected {}", text, expectation(*rule)), what);
    return std::nullopt;
  };
  if (rule == nullptr) return json(text);
  switch (rule->type) {
    case FieldType::integer:
    case FieldType::number: return number();
    case FieldType::nodes: {  // N, or torchrun's MIN:MAX (an elastic job; N:N is N)
      auto colon = text.find(':');
      json lo = json::parse(text.substr(0, colon), nullptr, false);
      json hi = colon == std::string::npos ? lo : json::parse(text.substr(colon + 1), nullptr, false);
      if (!lo.is_number_integer() || !hi.is_number_integer()) {
        problem(fmt::format("'{}' is not a node count; expected N (e.g. 2) or MIN:MAX (an elastic job, e.g. 1:4)", text),
                what);
        return std::nullopt;
      }
      return lo == hi ? lo : json{{"min", lo}, {"max", hi}};
    }
    default: return json(text);
  }
}

void FlagSink::spec(const std::string& pointer, const json& value, const std::string& what) {
  if (contradicts(*this, pointer, value)) return;
  state.ov.flag_sets.push_back({pointer, value.dump(), what.empty() ? flag() : what, origin});
}

void FlagSink::setting(const std::string& name, const json& value) {
  const SettingInfo* s = find_setting(name);
  if (s == nullptr) throw std::logic_error("flag " + flag() + ": no launch setting " + name);
  if (contradicts(*this, name, value)) return;
  Collector c;
  if (!check_field(s->rule, value, flag(), c)) {
    for (auto& p : c.problems) problem(std::move(p.message));
    return;
  }
  state.applying = said(row, value);
  s->apply(state, value);
  if (s->note != nullptr) note(fmt::format("{}: {}", said(row, value), s->note));
}

void apply_flag(const FlagRow& row, const std::string& text, const std::string& origin, LaunchState& state) {
  FlagSink sink{state, row, origin};
  const bool spec_field = row.target[0] == '/';
  if (row.read != nullptr) {
    row.read(row, text, sink);
  } else if (row.kind == FlagKind::toggle) {
    json v = json::parse(row.toggle_value);
    if (spec_field) sink.spec(row.target, v);
    else sink.setting(row.target, v);
  } else if (spec_field) {
    if (auto v = sink.typed(find_field(row.target), text)) sink.spec(row.target, *v);
  } else if (const SettingInfo* s = find_setting(row.target)) {
    if (auto v = sink.typed(&s->rule, text)) sink.setting(row.target, *v);
  }
}

}  // namespace dtrain::config::detail
