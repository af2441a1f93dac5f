#include "dtrain/common/text.hpp"

#include <algorithm>
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

std::string printable(std::string_view s, std::size_t max) {
  std::string out;
  bool cut = s.size() > max;
  if (cut) s = s.substr(0, max);
  out.reserve(s.size());
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
    else out.push_back(ch);
  }
  if (cut) out += "...";
  return out;
}

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 14695981039346656037ull;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace dtrain::text
