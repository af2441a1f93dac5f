#include "dtrain/config/hostlist.hpp"

#include <charconv>

#include <fmt/format.h>

#include "dtrain/common/errors.hpp"

namespace dtrain::config {
namespace {

constexpr std::size_t kMaxHosts = 1 << 20;

[[noreturn]] void bad(std::string_view list, std::string_view why) {
  throw ConfigError(fmt::format("hostlist '{}': {}", list, why));
}

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

std::uint64_t to_number(std::string_view list, std::string_view s) {
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size()) bad(list, fmt::format("'{}' is not a number", s));
  return v;
}

// "01-03,07" -> 01 02 03 07
std::vector<std::string> expand_ranges(std::string_view list, std::string_view body) {
  std::vector<std::string> out;
  if (body.empty()) bad(list, "empty brackets []");
  std::size_t start = 0;
  while (start <= body.size()) {
    auto comma = body.find(',', start);
    std::string_view item = body.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    auto dash = item.find('-');
    std::string_view lo = item.substr(0, dash);
    std::string_view hi = dash == std::string_view::npos ? lo : item.substr(dash + 1);
    if (!all_digits(lo) || !all_digits(hi))
      bad(list, fmt::format("'[{}]' has '{}'; expected numbers or ranges like 01-04,07", body, item));
    std::uint64_t a = to_number(list, lo), b = to_number(list, hi);
    if (b < a) bad(list, fmt::format("range '{}' runs backwards", item));
    if (b - a >= kMaxHosts) bad(list, fmt::format("range '{}' is too large", item));
    std::size_t width = lo.size() > 1 && lo[0] == '0' ? lo.size() : (lo.size() == hi.size() ? lo.size() : 0);
    for (std::uint64_t v = a; v <= b; ++v) {
      out.push_back(fmt::format("{:0{}}", v, width));
      if (out.size() > kMaxHosts) bad(list, "expands to more than a million hosts");
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

// One host expression, e.g. "rack[1-2]-n[01-02]".
void expand_one(std::string_view list, std::string_view expr, std::vector<std::string>& out) {
  std::vector<std::string> acc = {""};
  std::size_t i = 0;
  while (i < expr.size()) {
    auto open = expr.find('[', i);
    std::string_view literal = expr.substr(i, open == std::string_view::npos ? std::string_view::npos : open - i);
    if (literal.find(']') != std::string_view::npos) bad(list, fmt::format("unmatched ']' in '{}'", expr));
    for (auto& a : acc) a += literal;
    if (open == std::string_view::npos) break;
    auto close = expr.find(']', open);
    if (close == std::string_view::npos) bad(list, fmt::format("unclosed '[' in '{}'", expr));
    auto parts = expand_ranges(list, expr.substr(open + 1, close - open - 1));
    std::vector<std::string> next;
    if (acc.size() * parts.size() > kMaxHosts) bad(list, "expands to more than a million hosts");
    next.reserve(acc.size() * parts.size());
    for (const auto& a : acc)
      for (const auto& p : parts) next.push_back(a + p);
    acc = std::move(next);
    i = close + 1;
  }
  for (auto& a : acc) {
    if (a.empty()) bad(list, "empty host name");
    out.push_back(std::move(a));
    if (out.size() > kMaxHosts) bad(list, "expands to more than a million hosts");
  }
}

}  // namespace

std::vector<std::string> expand_hostlist(std::string_view list) {
  std::vector<std::string> out;
  if (list.empty()) bad(list, "empty");
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= list.size(); ++i) {
    char c = i < list.size() ? list[i] : ',';
    if (c == '[') {
      if (++depth > 1) bad(list, "nested '['");
    } else if (c == ']') {
      if (--depth < 0) bad(list, "unmatched ']'");
    } else if (c == ' ' || c == '\t' || c == '\n') {
      bad(list, "contains whitespace");
    } else if (c == ',' && depth == 0) {
      std::string_view expr = list.substr(start, i - start);
      if (expr.empty()) bad(list, "empty host name between commas");
      expand_one(list, expr, out);
      start = i + 1;
    }
  }
  if (depth != 0) bad(list, "unclosed '['");
  return out;
}

}  // namespace dtrain::config
