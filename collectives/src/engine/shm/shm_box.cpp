// Shared-memory engine: the latency path of allreduces up to kBoxBytes per rank. Each local rank has
// two boxes in the segment, used in turn (the parity of the box call's number): a header line and
// kBoxBytes of data. A call copies this rank's contribution into its box (into the header line
// itself when it fits in 40 bytes), then writes the header line: the call's fingerprint and, last,
// the flag, the box call's number (release; the stores become visible in order, so the data before
// the flag). It then waits for each peer's flag, compares the peer's fingerprint with its own, and
// reduces every contribution in rank order (the order of every other path) straight from the
// peers' boxes. No sync and no shared counter: per call one header line moves from each rank to
// each peer (the only transfer for up to 40 bytes; the data lines of larger calls follow in
// parallel), and nothing enters the kernel while the peers arrive within the spin. A box is written
// again two box calls later, after this rank has seen every peer's flag of the call in between,
// which each peer raises only after it has read this box: so reuse needs no sync either.
// Waiting: the engine's adaptive spin, then futex sleep on the header's phase word in slices (the
// abort record, peer liveness, mismatched calls and the deadline checked between them); a writer
// enters the kernel to wake sleepers only when there are some.
#include <algorithm>
#include <atomic>
#include <cstring>

#include <fmt/format.h>

#include "../../reduce.hpp"
#include "../../wait.hpp"
#include "shm_engine.hpp"
#include "shm_layout.hpp"

namespace dtrain::coll::shm {

Engine::BoxLine* Engine::box(int rank, std::uint64_t call) const {
  const std::size_t index = static_cast<std::size_t>(rank) * 2 + static_cast<std::size_t>(call & 1u);
  return reinterpret_cast<BoxLine*>(static_cast<std::uint8_t*>(base_) + layout_.boxes_offset + index * kBoxStride);
}

namespace {
// Where a box holds its contribution of `bytes` bytes.
const std::uint8_t* box_data(const Engine::BoxLine* b, std::size_t bytes) {
  return bytes <= kBoxInline ? b->data : reinterpret_cast<const std::uint8_t*>(b + 1);
}
}  // namespace

void Engine::allreduce_box(const OpDesc& d, const std::uint8_t* send, std::uint8_t* recv) {
  const std::size_t bytes = d.count * dtype_size(d.dtype);
  ++box_calls_;
  box_publish(d, send, bytes);
  for (int j = 0; j < n_; ++j) {
    if (j == me_) {
      srcs_[static_cast<std::size_t>(j)] = send;
      continue;
    }
    const BoxLine* b = box(j, box_calls_);
    box_wait(d, j, *b);
    if (b->fp0 != d.fp0() || b->fp1 != d.fp1())
      throw CollError(DTRAIN_ERR_MISMATCH,
                      fmt::format("mismatched collective calls at call #{} (every rank must make the same calls with "
                                  "the same count, dtype, op and root): rank {}: {}; rank {}: {}",
                                  d.seq, granks_[me_], describe_fingerprint(d.fp0(), d.fp1()),
                                  granks_[static_cast<std::size_t>(j)], describe_fingerprint(b->fp0, b->fp1)));
    srcs_[static_cast<std::size_t>(j)] = box_data(b, bytes);
  }
  reduce_n(srcs_.data(), n_, recv, nullptr, d.count, d.dtype, d.op, d.op == DTRAIN_AVG ? n_ : 1);
}

// The data, then the header line, its flag last.
void Engine::box_publish(const OpDesc& d, const std::uint8_t* send, std::size_t bytes) {
  BoxLine* b = box(me_, box_calls_);
  std::memcpy(const_cast<std::uint8_t*>(box_data(b, bytes)), send, bytes);
  b->fp0 = d.fp0();
  b->fp1 = d.fp1();
  b->flag.store(box_calls_, std::memory_order_release);
  // The flag before the sleepers' count: a peer that counted itself before this load is woken, one
  // that counts itself after it sees the flag (the pairing of sync()).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (hdr_->sleepers.load(std::memory_order_relaxed) != 0) {
    hdr_->phase.fetch_add(1, std::memory_order_seq_cst);
    futex_wake_all(hdr_->phase, hdr_->sleepers);
  }
}

void Engine::box_wait(const OpDesc& d, int rank, const BoxLine& b) {
  auto ready = [&] { return b.flag.load(std::memory_order_acquire) == box_calls_; };
  if (ready() || spin(ready)) return;
  const auto t0 = Clock::now();
  for (;;) {
    box_check_peer(d, rank);
    hdr_->sleepers.fetch_add(1, std::memory_order_seq_cst);
    const std::uint32_t p = hdr_->phase.load(std::memory_order_seq_cst);
    const bool done = ready();
    if (!done) futex_wait(hdr_->phase, p, std::chrono::milliseconds(20));
    hdr_->sleepers.fetch_sub(1, std::memory_order_seq_cst);
    if (done || ready()) break;
  }
  adapt_after_sleep(t0);
}

// Between sleeps: the abort record, the peer waited for (destroyed its communicator, died), a peer
// in another call, the deadline.
void Engine::box_check_peer(const OpDesc& d, int rank) {
  auto arrived = [&](int j) {
    return j == me_ || box(j, box_calls_)->flag.load(std::memory_order_acquire) == box_calls_;
  };
  check_abort(d);
  check_peer(d, rank, [&] { return arrived(rank); });
  check_peer_calls(d, [&] { return arrived(rank); });
  if (Clock::now() >= d.deadline) fail_timeout(d, arrived);
}

}  // namespace dtrain::coll::shm
