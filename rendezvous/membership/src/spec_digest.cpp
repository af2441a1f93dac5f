// Spec digests compared field by field (spec_digest.hpp).
#include "spec_digest.hpp"

#include <fmt/format.h>

#include <utility>
#include <vector>

namespace dtrain::rdzv {
namespace {

using Fields = std::vector<std::pair<std::string, std::string>>;

Fields fields_of(const std::string& digest) {
  Fields out;
  std::size_t start = 0;
  while (start < digest.size()) {
    auto nl = digest.find('\n', start);
    std::string line = digest.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    start = nl == std::string::npos ? digest.size() : nl + 1;
    auto eq = line.find('=');
    if (eq == std::string::npos || eq == 0) return {{"spec", digest}};
    out.emplace_back(line.substr(0, eq), line.substr(eq + 1));
  }
  return out;
}

const std::string* value_of(const Fields& f, const std::string& name) {
  for (const auto& [k, v] : f)
    if (k == name) return &v;
  return nullptr;
}

}  // namespace

std::string spec_difference(const std::string& first, const std::string& first_who, const std::string& other,
                            const std::string& other_who) {
  Fields a = fields_of(first), b = fields_of(other);
  std::string out;
  auto add = [&](const std::string& name, const std::string* x, const std::string* y) {
    out += fmt::format("{}{}: {} on {}, {} on {}", out.empty() ? "" : "; ", name, x ? "'" + *x + "'" : "(none)",
                       first_who, y ? "'" + *y + "'" : "(none)", other_who);
  };
  for (const auto& [k, v] : a) {
    const std::string* y = value_of(b, k);
    if (y == nullptr || *y != v) add(k, &v, y);
  }
  for (const auto& [k, v] : b)
    if (value_of(a, k) == nullptr) add(k, nullptr, &v);
  return out.empty() ? "the specs differ" : out;
}

}  // namespace dtrain::rdzv
