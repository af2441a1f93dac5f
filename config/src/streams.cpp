// torchrun's --redirects/--tee values (streams.hpp).
#include "dtrain/config/streams.hpp"

#include <fmt/format.h>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/text.hpp"

namespace dtrain::config {

bool StreamChoice::none() const {
  if (all != 0) return false;
  for (const auto& [rank, bits] : by_local_rank)
    if (bits != 0) return false;
  return true;
}

StreamChoice parse_streams(const std::string& text, const char* flag) {
  StreamChoice c;
  auto bad = [&] {
    return ConfigError(fmt::format("{}: '{}' is not a stream choice; expected 0 (none), 1 (stdout), 2 (stderr) or 3 "
                                   "(both), or LOCAL_RANK:N pairs such as 0:3,1:2", flag, text));
  };
  auto digit = [&](const std::string& d) {
    if (d.size() != 1 || d[0] < '0' || d[0] > '3') throw bad();
    return d[0] - '0';
  };
  if (text.find(':') == std::string::npos) {
    c.all = digit(text);
    return c;
  }
  for (const auto& part : text::split(text, ',')) {
    auto colon = part.find(':');
    if (colon == std::string::npos || colon == 0) throw bad();
    int rank = 0;
    try {
      std::size_t pos = 0;
      rank = std::stoi(part.substr(0, colon), &pos);
      if (pos != colon || rank < 0) throw bad();
    } catch (const std::logic_error&) {
      throw bad();
    }
    c.by_local_rank[rank] = digit(part.substr(colon + 1));
  }
  return c;
}

}  // namespace dtrain::config
