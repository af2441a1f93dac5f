#include "liveness.hpp"

#include <fmt/format.h>

#include "dtrain/rendezvous/store/refused.hpp"

namespace dtrain::rdzv {

using std::chrono::milliseconds;

void record_heartbeat(Node* n, const JoinBarrier& join, const wire::Frame& f, Clock::time_point now) {
  if (n == nullptr || !join.closed())
    throw Refused(wire::ErrorCode::not_joined, "heartbeat from a connection that has not joined");
  if (n->lost) throw Refused(wire::ErrorCode::lost, "this node was already declared lost; stop and re-join");
  n->last_seen = now;
  n->state = std::string(f.str_at(0).substr(0, 32));
  n->running = f.i64_at(1);
  n->exited = f.i64_at(2);
  n->restarts = f.i64_at(3);
}

std::optional<Silent> first_silent(const JoinBarrier& join, Clock::time_point now) {
  auto timeout = join.heartbeat_timeout();
  if (!join.closed() || timeout.count() <= 0) return std::nullopt;
  for (const auto& n : join.nodes()) {
    if (n->lost || n->left) continue;
    auto age = std::chrono::duration_cast<milliseconds>(now - n->last_seen);
    if (age > timeout)
      return Silent{n.get(), fmt::format("no heartbeat for {:.1f} s (timeout {:.1f} s)", double(age.count()) / 1000.0,
                                         double(timeout.count()) / 1000.0)};
  }
  return std::nullopt;
}

}  // namespace dtrain::rdzv
