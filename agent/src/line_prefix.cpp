// A worker line's tag and timestamp (line_prefix.hpp).
#include "dtrain/agent/line_prefix.hpp"

#include <fmt/format.h>

#include <ctime>

#include "dtrain/common/errors.hpp"

namespace dtrain::agent {

std::string format_tag(std::string_view format, int node, int rank, int local_rank,
                       std::string_view stream) {
  std::string out;
  for (std::size_t i = 0; i < format.size(); ++i) {
    char c = format[i];
    if (c == '{' && i + 1 < format.size() && format[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    if (c == '}' && i + 1 < format.size() && format[i + 1] == '}') {
      out.push_back('}');
      ++i;
      continue;
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    auto close = format.find('}', i);
    if (close == std::string_view::npos)
      throw ConfigError(fmt::format("output tag format \"{}\": unclosed '{{'", format));
    auto field = format.substr(i + 1, close - i - 1);
    if (field == "node") out += std::to_string(node);
    else if (field == "rank") out += std::to_string(rank);
    else if (field == "local_rank") out += std::to_string(local_rank);
    else if (field == "stream") out += stream;
    else
      throw ConfigError(fmt::format(
          "output tag format \"{}\": unknown field {{{}}}; expected {{node}}, {{rank}}, {{local_rank}} or {{stream}}",
          format, field));
    i = close;
  }
  return out;
}

std::string timestamp_prefix(std::chrono::system_clock::time_point t) {
  auto secs = std::chrono::system_clock::to_time_t(t);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count() % 1000;
  std::tm tm{};
  localtime_r(&secs, &tm);
  char buf[64];
  std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03d} ", std::string_view(buf, n), static_cast<int>(ms));
}

}  // namespace dtrain::agent
