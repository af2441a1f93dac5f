// The latency path of small allreduces (boxes.hpp).
#include "boxes.hpp"

#include <atomic>
#include <cstring>

#include <fmt/format.h>

#include "../../reduce.hpp"

namespace dtrain::coll::shm {
namespace {

constexpr std::size_t kBoxInline = sizeof(BoxLine::data);

// Where a box holds its contribution of `bytes` bytes.
const std::uint8_t* box_data(const BoxLine* b, std::size_t bytes) {
  return bytes <= kBoxInline ? b->data : reinterpret_cast<const std::uint8_t*>(b + 1);
}

}  // namespace

Boxes::Boxes(Segment& segment, Peers& peers, Waiter& waiter)
    : seg_(segment), peers_(peers), waiter_(waiter), srcs_(static_cast<std::size_t>(segment.local_size())) {}

void Boxes::allreduce(const OpDesc& d, const std::uint8_t* send, std::uint8_t* recv) {
  const std::size_t bytes = d.count * dtype_size(d.dtype);
  const int n = peers_.size(), me = peers_.me();
  ++calls_;
  publish(d, send, bytes);
  for (int j = 0; j < n; ++j) {
    if (j == me) {
      srcs_[static_cast<std::size_t>(j)] = send;
      continue;
    }
    const BoxLine* b = seg_.box(j, calls_);
    wait_for(d, j);
    if (b->fp0 != d.fp0() || b->fp1 != d.fp1())
      throw CollError(DTRAIN_ERR_MISMATCH,
                      fmt::format("mismatched collective calls at call #{} (every rank must make the same calls with "
                                  "the same count, dtype, op and root): rank {}: {}; rank {}: {}",
                                  d.seq, peers_.world(me), describe_fingerprint(d.fp0(), d.fp1()), peers_.world(j),
                                  describe_fingerprint(b->fp0, b->fp1)));
    srcs_[static_cast<std::size_t>(j)] = box_data(b, bytes);
  }
  reduce_n(srcs_.data(), n, recv, nullptr, d.count, d.dtype, d.op, d.op == DTRAIN_AVG ? n : 1);
}

// The data, then the header line, its flag last.
void Boxes::publish(const OpDesc& d, const std::uint8_t* send, std::size_t bytes) {
  BoxLine* b = seg_.box(peers_.me(), calls_);
  std::memcpy(const_cast<std::uint8_t*>(box_data(b, bytes)), send, bytes);
  b->fp0 = d.fp0();
  b->fp1 = d.fp1();
  // The flag, from this box's previous call's number, unless a peer gave up on this call first. The
  // compare-exchange is a full barrier: the flag before the sleepers' count, so a peer that counted
  // itself before this load is woken, one that counts itself after it sees the flag.
  if (!arrive(b->flag, calls_ > 2 ? calls_ - 2 : 0, calls_)) peers_.throw_given_up(d.text());
  if (seg_.header().sleepers.load(std::memory_order_relaxed) != 0) seg_.wake_collectives();
}

bool Boxes::arrived(int j) const {
  return j == peers_.me() || reached(seg_.box(j, calls_)->flag.load(std::memory_order_acquire), calls_);
}

// Until local rank j's flag; between sleeps the abort record, rank j's liveness, a peer in another
// call (whose rank would never raise a flag here), the deadline. On any of them this rank gives up
// on the call for every rank, records why and throws, unless every flag came meanwhile (as in
// Barrier::check).
void Boxes::wait_for(const OpDesc& d, int j) {
  auto& h = seg_.header();
  waiter_.wait(h.phase, h.sleepers, [&] { return arrived(j); }, [&] {
    peers_.check_or_give_up(
        [&] {
          if (peers_.aborted()) peers_.throw_abort(d.text());
          peers_.check_alive(d, j, [&] { return arrived(j); });
          peers_.check_peer_calls(d, [&] { return arrived(j); });
          if (Clock::now() >= d.deadline) peers_.fail_timeout(d, [&](int k) { return arrived(k); });
        },
        [&] { return give_up(); });
  });
}

// A peer's flag of this box call is the previous call's number or this one's (a peer is at most one
// box call ahead, in the other box), perhaps marked: reached() tells them apart.
bool Boxes::give_up() {
  bool given_up = false;
  for (int k = 0; k < peers_.size(); ++k)
    if (k != peers_.me()) given_up = give_up_on(seg_.box(k, calls_)->flag, calls_) || given_up;
  return given_up;
}

}  // namespace dtrain::coll::shm
