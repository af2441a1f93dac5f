#pragma once
// The shared-memory segment's layout (see shm_engine.hpp), shared by the engine's source files.
#include <atomic>
#include <cstddef>
#include <cstdint>

#include <sched.h>

#include "../../wait.hpp"
#include "shm_engine.hpp"

namespace dtrain::coll::shm {

constexpr std::uint64_t kMagic = 0x3148536e69617274ull;  // "trainSH1"
constexpr int kMaxLocal = 1024;
constexpr std::size_t kMinRingBytes = 16 << 10;  // a point-to-point ring holds at least this
constexpr std::size_t kMaxRingBytes = 1 << 20;   // and at most this
constexpr std::size_t kFrameHeader = 64;         // bytes of a point-to-point frame's header

struct Engine::Header {
  std::atomic<std::uint64_t> magic;
  std::uint32_t local_size;
  std::uint32_t pad0;
  std::uint64_t slot_bytes;
  std::uint64_t total_bytes;
  alignas(64) std::atomic<std::uint32_t> mapped;
  alignas(64) std::atomic<std::uint32_t> count;   // arrivals at the current sync
  alignas(64) std::atomic<std::uint32_t> phase;   // bumped by the last arrival: the futex word
  std::atomic<std::uint32_t> sleepers;
  alignas(64) std::atomic<std::int32_t> abort_rank;  // -1: none
  std::atomic<std::uint32_t> abort_status;
  std::atomic<std::uint32_t> abort_ready;
  char abort_msg[1024];
};

struct alignas(64) Engine::RankCtl {
  // Hot line, read by every peer in every call: arrival epoch and the call's fingerprint.
  std::atomic<std::uint32_t> epoch;     // syncs passed
  std::uint32_t pad0;
  std::atomic<std::uint64_t> fp[2][3];  // per call parity: fp0, fp1, seq
  // Cold line, written by its rank, read by peers only on the slow path (timeouts, liveness).
  alignas(64) std::atomic<std::uint64_t> seq;  // last call this rank entered
  std::atomic<std::uint32_t> kind;   // its OpKind
  std::atomic<std::uint32_t> busy;   // 1 while inside the call
  std::atomic<std::uint32_t> state;  // 1: destroyed its communicator
  std::atomic<std::int32_t> pid;
  // Point-to-point line: the doorbell peers ring when they change one of this rank's rings (a
  // message or free space for it), the futex word it sleeps on; and what it is doing, for messages.
  alignas(64) std::atomic<std::uint32_t> bell;
  std::atomic<std::uint32_t> bell_sleepers;
  std::atomic<std::uint32_t> p2p_busy;   // 1 while inside a point-to-point call
  std::atomic<std::int32_t> p2p_to;      // local rank it sends to, -1: none
  std::atomic<std::int32_t> p2p_from;    // local rank it receives from, -1: none
  std::atomic<std::uint64_t> p2p_sseq;   // message number of that send
  std::atomic<std::uint64_t> p2p_rseq;   // and of that receive
};
static_assert(sizeof(Engine::RankCtl) == 192, "three cache lines per rank");

// The ring of one ordered pair (sender -> receiver): positions count bytes since setup, each on its
// own cache line; the data (ring_bytes) follows. Frames are a 64-byte header and the payload padded
// to 64 bytes, so a header never wraps.
struct Engine::Ring {
  alignas(64) std::atomic<std::uint64_t> head;  // written by the sender: bytes put in
  alignas(64) std::atomic<std::uint64_t> tail;  // written by the receiver: bytes taken out
};
static_assert(sizeof(Engine::Ring) == 128, "two cache lines of ring control");

inline std::size_t round_up(std::size_t x, std::size_t a) { return (x + a - 1) / a * a; }

// The latency path's boxes (shm_box.cpp): per local rank two boxes, used in turn (the parity of the
// box call's number): a header line (the call's fingerprint, up to 40 bytes of data inline, and the
// flag: the number of the box call that wrote the box, stored last) and kBoxBytes of data.
struct alignas(64) Engine::BoxLine {
  std::uint64_t fp0, fp1;
  std::uint8_t data[40];            // the contribution itself when it fits
  std::atomic<std::uint64_t> flag;  // the box call whose data the box holds (0: none yet)
};
static_assert(sizeof(Engine::BoxLine) == 64, "one cache line");
constexpr std::size_t kBoxInline = sizeof(Engine::BoxLine::data);
constexpr std::size_t kBoxStride = sizeof(Engine::BoxLine) + kBoxBytes;  // one box

constexpr int kSpinGrowth = 20;  // the adaptive spin reaches at most this x DTRAIN_COLL_SPIN_US
constexpr int kPauseUs = 50;     // then it yields between polls (a peer may wait for this very core)

// Spins while the peers are likely running, until ready() or the budget is spent. The budget
// (DTRAIN_COLL_SPIN_US up to kSpinGrowth times that) doubles each time ready() comes within it;
// after a sleep adapt_after_sleep() makes it twice the whole wait when that was short (a peer that
// was itself waking up: spinning through its wake-up next time breaks the chain where each rank
// sleeps in turn and every call pays a futex wake-up) and DTRAIN_COLL_SPIN_US when it was long (a
// peer busy elsewhere: sleep soon, burn less). After kPauseUs of pausing the spin yields between
// polls, so a peer queued on this very core (other work on the machine) gets it; with more local
// ranks than CPUs it yields from the start and never grows.
template <class Ready>
bool Engine::spin(Ready&& ready) {
  const auto start = Clock::now();
  const auto spin_until = start + std::chrono::microseconds(spin_budget_us_);
  const auto yield_from = start + std::chrono::microseconds(kPauseUs);
  bool yielding = oversubscribed_;
  for (;;) {
    for (int i = 0; i < 32; ++i) {
      if (ready()) {
        if (!oversubscribed_) spin_budget_us_ = std::min(spin_budget_us_ * 2, kSpinGrowth * spin_us_);
        return true;
      }
      if (yielding) ::sched_yield();
      else cpu_relax();
    }
    const auto now = Clock::now();
    if (now >= spin_until) return false;
    yielding = yielding || now >= yield_from;
  }
}

}  // namespace dtrain::coll::shm
