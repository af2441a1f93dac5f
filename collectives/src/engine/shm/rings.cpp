// Point-to-point through the segment's rings (rings.hpp).
#include "rings.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "../../wait.hpp"

namespace dtrain::coll::shm {
namespace {

constexpr std::uint64_t kFrameMagic = 0x3150326e69617274ull;  // "trainP21"
constexpr std::uint64_t kFrameHeader = 64;                     // bytes of a frame's header
constexpr std::uint64_t kPiece = 64 << 10;  // bytes copied between two publications of a position

// Header words: magic, seq, fp0, fp1, payload length, then an inline payload of up to 24 bytes.
enum : int { kWMagic, kWSeq, kWFp0, kWFp1, kWLen, kWInline, kWords = 8 };
constexpr std::uint64_t kInlineBytes = (kWords - kWInline) * 8;

std::uint64_t frame_bytes(std::uint64_t len) { return kFrameHeader + (len <= kInlineBytes ? 0 : round_up(len, 64)); }

// Copies len bytes between a linear buffer and the ring at position pos (wrapping).
void ring_copy_in(std::uint8_t* ring, std::size_t ring_bytes, std::uint64_t pos, const std::uint8_t* src,
                  std::size_t len) {
  const std::size_t off = pos % ring_bytes, first = std::min(len, ring_bytes - off);
  std::memcpy(ring + off, src, first);
  if (len > first) std::memcpy(ring, src + first, len - first);
}
void ring_copy_out(std::uint8_t* dst, const std::uint8_t* ring, std::size_t ring_bytes, std::uint64_t pos,
                   std::size_t len) {
  const std::size_t off = pos % ring_bytes, first = std::min(len, ring_bytes - off);
  std::memcpy(dst, ring + off, first);
  if (len > first) std::memcpy(dst + first, ring, len - first);
}

}  // namespace

// After a position moved: wakes `rank` if it sleeps (the fence orders the position's store before
// the sleepers' load; the sleeper counts itself before it looks at the positions).
void Rings::notify(int rank) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (seg_.ctl(rank).bell_sleepers.load(std::memory_order_relaxed) != 0) seg_.ring_bell(rank);
}

// Puts as much of the frame into the ring as fits; true when it moved something.
bool Rings::send_step(Out& o) {
  if (o.finished()) return false;
  const std::size_t ring_bytes = seg_.layout().ring_bytes;
  Ring* r = seg_.ring(peers_.me(), o.m->peer);
  std::uint8_t* data = Segment::ring_data(r);
  std::uint64_t head = r->head.load(std::memory_order_relaxed);
  std::uint64_t free = ring_bytes - (head - r->tail.load(std::memory_order_acquire));
  const std::uint64_t len = o.m->d.bytes();
  if (o.done == 0) {
    if (free < kFrameHeader) return false;
    std::uint64_t h[kWords] = {kFrameMagic, o.m->d.seq, o.m->d.fp0(), o.m->d.fp1(), len, 0, 0, 0};
    if (len != 0 && len <= kInlineBytes) std::memcpy(&h[kWInline], o.m->src, len);
    std::memcpy(data + head % ring_bytes, h, sizeof h);
    o.total = frame_bytes(len);
    o.done = kFrameHeader;
    head += kFrameHeader;
    free -= kFrameHeader;
    if (o.done == o.total) {  // the whole message
      r->head.store(head, std::memory_order_release);
      notify(o.m->peer);
      return true;
    }
  } else if (free == 0) {
    return false;
  }
  const auto* src = static_cast<const std::uint8_t*>(o.m->src);
  do {  // publish the header with the first piece (or alone), then piece by piece
    const std::uint64_t n = std::min({free, o.total - o.done, kPiece});
    const std::uint64_t p = o.done - kFrameHeader;  // payload offset
    if (p < len) ring_copy_in(data, ring_bytes, head, src + p, static_cast<std::size_t>(std::min(n, len - p)));
    head += n;
    o.done += n;
    free -= n;
    r->head.store(head, std::memory_order_release);
    notify(o.m->peer);
  } while (free > 0 && o.done < o.total);
  return true;
}

// Takes as much of the frame out of the ring as is there; true when it moved something.
bool Rings::recv_step(In& i) {
  if (i.finished()) return false;
  const std::size_t ring_bytes = seg_.layout().ring_bytes;
  Ring* r = seg_.ring(i.m->peer, peers_.me());
  const std::uint8_t* data = Segment::ring_data(r);
  std::uint64_t tail = r->tail.load(std::memory_order_relaxed);
  std::uint64_t avail = r->head.load(std::memory_order_acquire) - tail;
  if (i.done == 0) {
    if (avail < kFrameHeader) return false;
    std::uint64_t h[kWords];
    std::memcpy(h, data + tail % ring_bytes, sizeof h);
    check_frame(i, h);
    i.total = frame_bytes(h[kWLen]);
    i.done = kFrameHeader;
    tail += kFrameHeader;
    avail -= kFrameHeader;
    if (i.done == i.total) {  // the whole message
      if (h[kWLen] != 0) std::memcpy(i.m->dst, &h[kWInline], h[kWLen]);
      r->tail.store(tail, std::memory_order_release);
      notify(i.m->peer);
      return true;
    }
  } else if (avail == 0) {
    return false;
  }
  const std::uint64_t len = i.m->d.bytes();
  auto* dst = static_cast<std::uint8_t*>(i.m->dst);
  do {
    const std::uint64_t n = std::min({avail, i.total - i.done, kPiece});
    const std::uint64_t p = i.done - kFrameHeader;
    if (p < len) ring_copy_out(dst + p, data, ring_bytes, tail, static_cast<std::size_t>(std::min(n, len - p)));
    tail += n;
    i.done += n;
    avail -= n;
    r->tail.store(tail, std::memory_order_release);
    notify(i.m->peer);
  } while (avail > 0 && i.done < i.total);
  return true;
}

void Rings::check_frame(const In& i, const std::uint64_t* h) const {
  const P2pDesc& d = i.m->d;
  const int from = peers_.world(i.m->peer), me = peers_.world(peers_.me());
  if (h[kWMagic] != kFrameMagic ||
      (h[kWSeq] == d.seq && h[kWFp0] == d.fp0() && h[kWFp1] == d.fp1() && h[kWLen] != d.bytes()))
    throw CollError(DTRAIN_ERR_INTERNAL, fmt::format("recv {} from rank {} on rank {}: corrupt frame in the "
                                                     "shared-memory ring",
                                                     d.text(), from, me));
  if (h[kWSeq] != d.seq || h[kWFp0] != d.fp0() || h[kWFp1] != d.fp1())
    throw CollError(DTRAIN_ERR_MISMATCH,
                    fmt::format("mismatched point-to-point calls: recv {} from rank {} on rank {} does not match "
                                "rank {}'s send {} to rank {} (messages between two ranks are matched in order; "
                                "tag, count and dtype must agree)",
                                d.text(), from, me, from, describe_p2p(h[kWSeq], h[kWFp0], h[kWFp1]), me));
}

void Rings::begin(Out& o, In& i) {
  if (peers_.aborted()) peers_.throw_abort(call_text(o, i));
  auto& c = seg_.ctl(peers_.me());
  c.p2p_to.store(o.m ? o.m->peer : -1, std::memory_order_relaxed);
  c.p2p_from.store(i.m ? i.m->peer : -1, std::memory_order_relaxed);
  c.p2p_sseq.store(o.m ? o.m->d.seq : 0, std::memory_order_relaxed);
  c.p2p_rseq.store(i.m ? i.m->d.seq : 0, std::memory_order_relaxed);
  c.p2p_busy.store(1, std::memory_order_release);
}

void Rings::end() { seg_.ctl(peers_.me()).p2p_busy.store(0, std::memory_order_release); }

bool Rings::step(Out& o, In& i) {
  const bool a = send_step(o);
  return recv_step(i) || a;
}

void Rings::sendrecv(const P2pMsg* out, const P2pMsg* in) {
  Out o{out};
  In i{in};
  begin(o, i);
  struct End {
    Rings& r;
    ~End() { r.end(); }
  } end{*this};
  while (!o.finished() || !i.finished())
    if (!step(o, i) && (!o.finished() || !i.finished())) wait(o, i);
}

Engine::Peek Rings::peek(int peer, std::uint64_t& fp0, std::uint64_t& fp1) {
  if (peers_.aborted()) peers_.throw_abort("point-to-point call");
  const Ring* r = seg_.ring(peer, peers_.me());
  const std::uint64_t tail = r->tail.load(std::memory_order_relaxed);
  if (r->head.load(std::memory_order_acquire) - tail < kFrameHeader) {
    if (peers_.gone(peer).empty()) return Engine::kNone;
    // Gone: a last look, it may have sent its message and left.
    return r->head.load(std::memory_order_acquire) - tail < kFrameHeader ? Engine::kGone : peek(peer, fp0, fp1);
  }
  std::uint64_t h[kWords];
  std::memcpy(h, Segment::ring_data(r) + tail % seg_.layout().ring_bytes, sizeof h);
  if (h[kWMagic] != kFrameMagic) return Engine::kNone;
  fp0 = h[kWFp0];
  fp1 = h[kWFp1];
  return Engine::kMessage;
}

// True when step() would move something: room for the frame's next bytes, or data to take.
bool Rings::ready(const Out& o, const In& i) const {
  if (!o.finished()) {
    const Ring* r = seg_.ring(peers_.me(), o.m->peer);
    const std::uint64_t used = r->head.load(std::memory_order_relaxed) - r->tail.load(std::memory_order_acquire);
    if (seg_.layout().ring_bytes - used >= (o.done == 0 ? kFrameHeader : 1)) return true;
  }
  if (!i.finished()) {
    const Ring* r = seg_.ring(i.m->peer, peers_.me());
    const std::uint64_t avail = r->head.load(std::memory_order_acquire) - r->tail.load(std::memory_order_relaxed);
    if (avail >= (i.done == 0 ? kFrameHeader : 1)) return true;
  }
  return false;
}

// The adaptive spin on the positions, then one sleep slice on the doorbell (which an abort or a
// departing peer rings too).
void Rings::wait(Out& o, In& i) {
  auto& c = seg_.ctl(peers_.me());
  const std::uint32_t seen = c.bell.load(std::memory_order_acquire);
  const auto t0 = Clock::now();
  if (waiter_.spin([&] { return ready(o, i) || c.bell.load(std::memory_order_acquire) != seen; })) return;
  check(o, i);
  c.bell_sleepers.fetch_add(1, std::memory_order_seq_cst);
  if (!ready(o, i) && c.bell.load(std::memory_order_seq_cst) == seen) futex_wait(c.bell, seen, Waiter::kSlice);
  c.bell_sleepers.fetch_sub(1, std::memory_order_seq_cst);
  waiter_.after_sleep(t0);
}

// Nothing moved: an abort record, a dead or departed peer (after a last look at its ring: it may
// have sent everything and left) or the deadline end the call.
void Rings::check(Out& o, In& i) {
  if (peers_.aborted()) peers_.throw_abort(call_text(o, i));
  for (const int peer : {o.finished() ? -1 : o.m->peer, i.finished() ? -1 : i.m->peer}) {
    if (peer < 0) continue;
    const std::string what = peers_.gone(peer);
    if (what.empty()) continue;
    if (step(o, i)) return;
    fail_peer(o, i, peer, what);
  }
  const auto deadline = std::min(o.finished() ? Clock::time_point::max() : o.m->d.deadline,
                                 i.finished() ? Clock::time_point::max() : i.m->d.deadline);
  if (Clock::now() < deadline) return;
  std::string waiting;
  if (!i.finished()) waiting = fmt::format("rank {} has not sent it", peers_.world(i.m->peer));
  if (!o.finished())
    waiting += fmt::format("{}rank {} has not taken it ({} of {} bytes left in the ring)", waiting.empty() ? "" : "; ",
                           peers_.world(o.m->peer), o.total ? o.total - o.done : frame_bytes(o.m->d.bytes()),
                           o.total ? o.total : frame_bytes(o.m->d.bytes()));
  const int peer = !i.finished() ? i.m->peer : o.m->peer;
  throw CollError(DTRAIN_ERR_TIMEOUT, fmt::format("{} timed out after {} on rank {}: {}; rank {} is {}", call_text(o, i),
                                                  seconds_text((!i.finished() ? i.m : o.m)->d.timeout),
                                                  peers_.world(peers_.me()), waiting, peers_.world(peer),
                                                  peers_.state_of(peer)));
}

std::string Rings::call_text(const Out& o, const In& i) const {
  std::string s;
  if (o.m) s = fmt::format("send {} to rank {}", o.m->d.text(), peers_.world(o.m->peer));
  if (i.m) s += fmt::format("{}recv {} from rank {}", s.empty() ? "" : " with ", i.m->d.text(), peers_.world(i.m->peer));
  return s.empty() ? "point-to-point call" : s;
}

void Rings::fail_peer(const Out& o, const In& i, int peer, const std::string& what) const {
  char host[256] = "this host";
  ::gethostname(host, sizeof host - 1);
  const bool sending = o.m && !o.finished() && o.m->peer == peer;
  throw CollError(DTRAIN_ERR_PEER, fmt::format("{} on rank {}: rank {} {} on host {} before it {}", call_text(o, i),
                                               peers_.world(peers_.me()), peers_.world(peer), what, host,
                                               sending ? "took the message" : "sent the whole message"));
}

}  // namespace dtrain::coll::shm
