#pragma once
// The progress page: what a worker's collectives library tells its agent about the worker's last
// collective call (op, bytes, sequence number, when it began and returned), through a small file
// the agent creates and names in DTRAIN_PROGRESS_FILE. The worker maps it and writes it with
// relaxed atomic stores under a sequence lock (no syscall per call: the clock is the vDSO's); the
// agent and `dtrain status` map it read-only and read a consistent snapshot.
//
// Version 2 adds, per op, the calls and the total time inside them (end - begin, from the two clock
// readings the call makes anyway: one add at end_call, no syscall): the straggler report
// (agent/straggler.hpp) compares these durations across ranks. A version 1 page reads without them.
#include <time.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace dtrain::progress {

inline constexpr std::uint32_t kMagic = 0x67707464;  // "dtpg"
inline constexpr std::uint32_t kVersion = 2;
inline constexpr std::size_t kOps = 16;  // the accumulators' slots: Op values 0 to 15
inline constexpr std::size_t kPageBytes = 4096;

// The collectives' operations: the values of coll::OpKind (collectives/src/call.hpp), one for one.
enum class Op : std::uint32_t {
  none = 0, barrier = 1, allreduce, broadcast, allgather, reduce_scatter, comm_split, send, recv,
  reduce, gather, scatter, alltoall, alltoallv, recv_any
};

inline const char* op_name(std::uint32_t op) {
  static const char* const names[] = {"none",      "barrier",   "allreduce", "broadcast", "allgather",
                                      "reduce_scatter", "comm_split", "send", "recv",     "reduce",
                                      "gather",    "scatter",   "alltoall",  "alltoallv", "recv_any"};
  return op < sizeof names / sizeof names[0] ? names[op] : "collective";
}

struct Page {
  std::atomic<std::uint32_t> magic;
  std::atomic<std::uint32_t> version;
  std::atomic<std::uint64_t> lock;      // sequence lock: odd while the writer updates the fields below
  std::atomic<std::uint32_t> op;        // Op of the last call
  std::atomic<std::int32_t> pid;
  std::atomic<std::uint64_t> seq;       // its sequence number on its communicator
  std::atomic<std::uint64_t> bytes;     // its payload (count x element size)
  std::atomic<std::uint64_t> calls;     // collective calls of this process so far
  std::atomic<std::int64_t> begin_ns;   // CLOCK_MONOTONIC when it began
  std::atomic<std::int64_t> end_ns;     // when it returned; 0 while the worker is inside it
  // version 2: per Op, the calls that returned and their total time inside (not under the lock:
  // each only grows, and a reader a call behind is fine)
  std::atomic<std::uint64_t> op_calls[kOps];
  std::atomic<std::int64_t> op_ns[kOps];
};
static_assert(sizeof(Page) <= kPageBytes);
// the offsets python/dtrain/_startup/sitecustomize.py writes at
static_assert(offsetof(Page, end_ns) == 56 && offsetof(Page, op_calls) == 64 && offsetof(Page, op_ns) == 64 + 8 * kOps);
static_assert(std::atomic<std::uint64_t>::is_always_lock_free && std::atomic<std::int64_t>::is_always_lock_free);

inline std::int64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// Writer (one thread at a time per page).
// now: CLOCK_MONOTONIC in ns when the call began (the collectives pass the coarse clock's reading
// of their deadline, a few ms behind at most: fine for a page read in seconds).
inline void begin_call(Page& p, Op op, std::uint64_t seq, std::uint64_t bytes, std::int64_t now = now_ns()) {
  auto v = p.lock.load(std::memory_order_relaxed);
  p.lock.store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  p.op.store(static_cast<std::uint32_t>(op), std::memory_order_relaxed);
  p.seq.store(seq, std::memory_order_relaxed);
  p.bytes.store(bytes, std::memory_order_relaxed);
  p.calls.store(p.calls.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  p.begin_ns.store(now, std::memory_order_relaxed);
  p.end_ns.store(0, std::memory_order_relaxed);
  p.lock.store(v + 2, std::memory_order_release);
}

inline void end_call(Page& p, std::int64_t now = now_ns()) {
  auto op = p.op.load(std::memory_order_relaxed);
  if (op < kOps) {  // the writer's own fields: plain loads and stores, no read-modify-write
    std::int64_t d = now - p.begin_ns.load(std::memory_order_relaxed);
    p.op_ns[op].store(p.op_ns[op].load(std::memory_order_relaxed) + (d > 0 ? d : 0), std::memory_order_relaxed);
    p.op_calls[op].store(p.op_calls[op].load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  p.end_ns.store(now, std::memory_order_release);
}

struct Snapshot {
  bool valid = false;  // a page written by a collectives library (not an empty file)
  std::uint32_t op = 0;
  int pid = 0;
  std::uint64_t seq = 0, bytes = 0, calls = 0;
  std::int64_t begin_ns = 0, end_ns = 0;
  std::uint64_t op_calls[kOps] = {};  // version 2 (zeros from a version 1 page)
  std::int64_t op_ns[kOps] = {};
  bool in_call() const { return valid && calls > 0 && end_ns == 0; }
};

// Reader: a consistent copy (retries while the writer is in the middle of an update).
inline Snapshot read(const Page& p) {
  Snapshot s;
  auto version = p.version.load(std::memory_order_relaxed);
  if (p.magic.load(std::memory_order_acquire) != kMagic || version < 1 || version > kVersion) return s;
  for (int tries = 0; tries < 1000; ++tries) {
    auto v1 = p.lock.load(std::memory_order_acquire);
    if (v1 & 1) continue;
    s.op = p.op.load(std::memory_order_relaxed);
    s.pid = p.pid.load(std::memory_order_relaxed);
    s.seq = p.seq.load(std::memory_order_relaxed);
    s.bytes = p.bytes.load(std::memory_order_relaxed);
    s.calls = p.calls.load(std::memory_order_relaxed);
    s.begin_ns = p.begin_ns.load(std::memory_order_relaxed);
    s.end_ns = p.end_ns.load(std::memory_order_acquire);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (p.lock.load(std::memory_order_relaxed) == v1) {
      s.valid = true;
      for (std::size_t i = 0; version >= 2 && i < kOps; ++i) {
        s.op_calls[i] = p.op_calls[i].load(std::memory_order_relaxed);
        s.op_ns[i] = p.op_ns[i].load(std::memory_order_relaxed);
      }
      return s;
    }
  }
  return s;
}

}  // namespace dtrain::progress
