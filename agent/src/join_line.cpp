// The join barrier's waiting line and error wording (join_line.hpp).
#include "join_line.hpp"

#include <unistd.h>

#include "dtrain/agent/write_all.hpp"
#include "dtrain/common/errors.hpp"

namespace dtrain::agent {

JoinLine::JoinLine(int mode, int fd) : fd_(fd), tty_(::isatty(fd) == 1), on_(mode != 0) {}

void JoinLine::show(const rdzv::JoinProgress& p) {
  if (!on_) return;
  std::string line = p.line();
  if (tty_) {
    write_all(fd_, "\r\x1b[Kdtrain: " + line);
    shown_ = true;
    return;
  }
  std::string key = p.reachable ? fmt::format("{}/{} {}", p.joined, p.instances, p.missing)
                    : p.why.find(rdzv::kDoesNotResolve) != std::string::npos ? "unresolved"
                                                                               : "unreachable";
  if (key == last_ && p.elapsed - last_at_ < kRepeat) return;
  last_ = key;
  last_at_ = p.elapsed;
  write_all(fd_, "dtrain: " + line + "\n");
}

void JoinLine::clear() {
  if (shown_) write_all(fd_, "\r\x1b[K");
  shown_ = false;
}

rdzv::JoinResult join_with_line(rdzv::Membership& s, std::optional<int> rejoin_generation, JoinLine& line,
                                const std::string& endpoint) {
  auto progress = [&line](const rdzv::JoinProgress& p) { line.show(p); };
  try {
    auto r = rejoin_generation ? s.rejoin(*rejoin_generation, progress) : s.join(progress);
    line.clear();
    return r;
  } catch (const rdzv::Cancelled&) {
    line.clear();
    throw;
  } catch (const IoError& e) {
    line.clear();
    throw TimeoutError(fmt::format("joining the rendezvous at {}: {}", endpoint, e.what()));
  } catch (...) {
    line.clear();
    throw;
  }
}

}  // namespace dtrain::agent
