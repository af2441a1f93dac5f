// Communicator::recv_any: MPI_ANY_SOURCE for one tag. The next message of every ordered pair is
// visible without taking it (Engine::peek: the shm ring's head frame, the TCP socket's next
// header or a parked frame); the first peer whose next message has this tag is received from through
// sendrecv(), which checks its count and dtype as any receive does. Peers are polled round robin
// (starting after the last one served, so a busy sender cannot starve the others), spinning for
// ~50 us, then sleeping in slices that grow to 2 ms, until the communicator's deadline.
#include <chrono>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "comm.hpp"

namespace dtrain::coll {
namespace {
int tag_of(std::uint64_t fp1) { return static_cast<int>(static_cast<std::uint32_t>(fp1 >> 32)); }
}  // namespace

int Communicator::recv_any(void* buf, std::size_t count, dtrain_dtype_t dtype, int tag) {
  check_usable();
  P2pArgs a;
  a.dst = buf;
  a.count = count;
  a.dtype = dtype;
  a.peer = rank_;
  a.tag = tag;
  check_p2p(a, "recv_any");
  if (!self_.empty() && self_.front().d.tag == tag) {  // a message to itself is waiting
    sendrecv(nullptr, &a);
    return rank_;
  }
  for (int p = 0; p < size(); ++p)  // one a collective parked
    if (!parked_[static_cast<std::size_t>(p)].empty() && parked_[static_cast<std::size_t>(p)].front().d.tag == tag) {
      a.peer = p;
      sendrecv(nullptr, &a);
      return p;
    }
  const int n = size();
  const auto start = Clock::now(), deadline = start + cfg_.timeout;
  auto sleep = std::chrono::microseconds(0);
  for (;;) {
    int found = -1;
    std::vector<int> gone;
    run(nullptr, [&] {
      for (int k = 0; k < n && found < 0; ++k) {
        const int p = (any_next_ + k) % n;
        if (p == rank_) continue;
        std::uint64_t fp0 = 0, fp1 = 0;
        if (!parked_[static_cast<std::size_t>(p)].empty()) continue;  // its next message is a parked one
        const Engine::Peek got = engine_->peek(p, fp0, fp1);
        if (got == Engine::kMessage && tag_of(fp1) == tag) found = p;
        if (got == Engine::kGone) gone.push_back(world_rank(p));
      }
    });
    if (found < 0 && static_cast<int>(gone.size()) == n - 1) {
      const std::string msg = fmt::format("recv_any (tag {}) on rank {}: every other rank ({}) has left the "
                                          "communicator with no message of this tag left to take",
                                          tag, world_rank(rank_), fmt::join(gone, ", "));
      mark_failed(DTRAIN_ERR_PEER, msg);
      throw CollError(DTRAIN_ERR_PEER, msg);
    }
    if (found >= 0) {
      any_next_ = (found + 1) % n;
      a.peer = found;
      sendrecv(nullptr, &a);
      return found;
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      const std::string msg = fmt::format(
          "recv_any (tag {}, count {}, {}) timed out after {} on rank {}: no rank's next message to it carries tag "
          "{} (messages between two ranks arrive in order: one with another tag first blocks its sender's later ones)",
          tag, count, dtype_name(dtype), seconds_text(cfg_.timeout), world_rank(rank_), tag);
      mark_failed(DTRAIN_ERR_TIMEOUT, msg);
      throw CollError(DTRAIN_ERR_TIMEOUT, msg);
    }
    if (now - start < std::chrono::microseconds(50)) continue;  // spin briefly
    sleep = std::min(std::chrono::microseconds(2000), sleep + std::chrono::microseconds(100));
    std::this_thread::sleep_for(sleep);
  }
}

}  // namespace dtrain::coll
