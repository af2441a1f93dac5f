#include "dtrain/common/text.hpp"

#include <algorithm>
#include <charconv>
#include <numeric>

#include "dtrain/common/errors.hpp"

namespace dtrain::text {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  std::iota(prev.begin(), prev.end(), std::size_t{0});
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::optional<std::string> closest(std::string_view word, std::span<const std::string> candidates) {
  std::optional<std::string> best;
  std::size_t best_d = 0;
  for (const auto& c : candidates) {
    std::size_t d = edit_distance(word, c);
    if (!best || d < best_d) {
      best = c;
      best_d = d;
    }
  }
  // Close enough to be a slip of the keyboard: at most a third of the word, and at most 3 edits.
  if (best && best_d <= std::min<std::size_t>(3, std::max<std::size_t>(1, word.size() / 3))) return best;
  return std::nullopt;
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    auto pos = s.find(sep, start);
    out.emplace_back(s.substr(start, pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

std::string join(std::span<const std::string> parts, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

HostPort parse_host_port(std::string_view s, std::string_view what) {
  std::string_view host, port;
  if (!s.empty() && s.front() == '[') {
    auto close = s.find(']');
    if (close == std::string_view::npos || close + 1 >= s.size() || s[close + 1] != ':')
      throw ConfigError(fmt::format("{}: '{}' is not HOST:PORT (IPv6 as [addr]:port)", what, s));
    host = s.substr(1, close - 1);
    port = s.substr(close + 2);
  } else {
    auto colon = s.rfind(':');
    if (colon == std::string_view::npos || s.find(':') != colon)
      throw ConfigError(fmt::format("{}: '{}' is not HOST:PORT, e.g. 10.0.0.1:29400", what, s));
    host = s.substr(0, colon);
    port = s.substr(colon + 1);
  }
  if (host.empty()) throw ConfigError(fmt::format("{}: '{}' has an empty host, e.g. 10.0.0.1:29400", what, s));
  int p = -1;
  auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  if (port.empty() || ec != std::errc{} || ptr != port.data() + port.size())
    throw ConfigError(fmt::format("{}: port '{}' in '{}' is not a number", what, port, s));
  if (p < 1 || p > 65535)
    throw ConfigError(fmt::format("{}: port {} in '{}' is out of range 1-65535", what, p, s));
  return {std::string(host), p};
}

}  // namespace dtrain::text
