// MPI_ANY_SOURCE for one tag (recv_any.hpp).
#include "recv_any.hpp"

#include <chrono>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>


namespace dtrain::coll {
namespace {
int tag_of(std::uint64_t fp1) { return static_cast<int>(static_cast<std::uint32_t>(fp1 >> 32)); }
}  // namespace

int AnySource::find(Engine& engine, const Mailbox& mailbox, int tag, std::size_t count, dtrain_dtype_t dtype,
                    std::chrono::milliseconds timeout) {
  if (mailbox.self_tag() == tag) return rank_;
  const int n = static_cast<int>(world_.size());
  for (int p = 0; p < n; ++p)
    if (mailbox.parked_tag(p) == tag) return p;
  const auto start = Clock::now(), deadline = start + timeout;
  auto sleep = std::chrono::microseconds(0);
  for (;;) {
    std::vector<int> gone;
    for (int k = 0; k < n; ++k) {
      const int p = (next_ + k) % n;
      if (p == rank_ || mailbox.parked_tag(p) >= 0) continue;  // its next message is a parked one
      std::uint64_t fp0 = 0, fp1 = 0;
      const Engine::Peek got = engine.peek(p, fp0, fp1);
      if (got == Engine::kMessage && tag_of(fp1) == tag) {
        next_ = (p + 1) % n;
        return p;
      }
      if (got == Engine::kGone) gone.push_back(world_[static_cast<std::size_t>(p)]);
    }
    const int me = world_[static_cast<std::size_t>(rank_)];
    if (static_cast<int>(gone.size()) == n - 1)
      throw CollError(DTRAIN_ERR_PEER, fmt::format("recv_any (tag {}) on rank {}: every other rank ({}) has left the "
                                                   "communicator with no message of this tag left to take",
                                                   tag, me, fmt::join(gone, ", ")));
    const auto now = Clock::now();
    if (now >= deadline)
      throw CollError(DTRAIN_ERR_TIMEOUT,
                      fmt::format("recv_any (tag {}, count {}, {}) timed out after {} on rank {}: no rank's next "
                                  "message to it carries tag {} (messages between two ranks arrive in order: one "
                                  "with another tag first blocks its sender's later ones)",
                                  tag, count, dtype_name(dtype), seconds_text(timeout), me, tag));
    if (now - start < std::chrono::microseconds(50)) continue;  // spin briefly
    sleep = std::min(std::chrono::microseconds(2000), sleep + std::chrono::microseconds(100));
    std::this_thread::sleep_for(sleep);
  }
}

}  // namespace dtrain::coll
