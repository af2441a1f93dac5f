// Shared-memory engine: point-to-point. Every ordered pair of local ranks has a ring in the segment
// (shm_layout.hpp): a single-producer single-consumer byte stream of frames, each a 64-byte header
// (the message's P2pDesc fingerprint and length; a payload of up to 24 bytes rides in the header's
// last words, so a small message is one cache line) and the payload padded to 64 bytes. The sender
// copies in what fits and publishes its head; the receiver checks the header against its own
// description before it takes a byte, copies out and publishes its tail; large messages stream
// through the ring in pieces, both sides copying at once. A message that fits returns from the send
// before the receiver arrives. A rank with nothing to do spins (the collectives' adaptive spin) on
// the positions it waits for, then sleeps on its doorbell (a futex word) in slices, checking the
// abort record, the peer's liveness and the deadline between them; whoever moves a position rings
// the other side's doorbell only when it sleeps, so the fast path writes no shared word but the
// ring's own.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "../../wait.hpp"
#include "shm_engine.hpp"
#include "shm_layout.hpp"

namespace dtrain::coll::shm {
namespace {

constexpr std::uint64_t kFrameMagic = 0x3150326e69617274ull;  // "trainP21"
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

Engine::Ring* Engine::ring(int from, int to) const {
  const int idx = from * (n_ - 1) + (to < from ? to : to - 1);
  return reinterpret_cast<Ring*>(static_cast<std::uint8_t*>(base_) + layout_.rings_offset +
                                 static_cast<std::size_t>(idx) * (sizeof(Ring) + layout_.ring_bytes));
}

void Engine::ring_bell(int rank) {
  auto& c = ctl_[rank];
  c.bell.fetch_add(1, std::memory_order_seq_cst);
  futex_wake_all(c.bell, c.bell_sleepers);
}

// After a position moved: wakes `rank` if it sleeps (the fence orders the position's store before
// the sleepers' load; the sleeper counts itself before it looks at the positions).
void Engine::notify(int rank) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (ctl_[rank].bell_sleepers.load(std::memory_order_relaxed) != 0) ring_bell(rank);
}

// Puts as much of the frame into the ring as fits; true when it moved something.
bool Engine::send_step(P2pOut& o) {
  if (o.finished()) return false;
  Ring* r = ring(me_, o.m->peer);
  std::uint8_t* data = ring_data(r);
  std::uint64_t head = r->head.load(std::memory_order_relaxed);
  std::uint64_t free = layout_.ring_bytes - (head - r->tail.load(std::memory_order_acquire));
  const std::uint64_t len = o.m->d.bytes();
  if (o.done == 0) {
    if (free < kFrameHeader) return false;
    std::uint64_t h[kWords] = {kFrameMagic, o.m->d.seq, o.m->d.fp0(), o.m->d.fp1(), len, 0, 0, 0};
    if (len != 0 && len <= kInlineBytes) std::memcpy(&h[kWInline], o.m->src, len);
    std::memcpy(data + head % layout_.ring_bytes, h, sizeof h);
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
    if (p < len) ring_copy_in(data, layout_.ring_bytes, head, src + p, static_cast<std::size_t>(std::min(n, len - p)));
    head += n;
    o.done += n;
    free -= n;
    r->head.store(head, std::memory_order_release);
    notify(o.m->peer);
  } while (free > 0 && o.done < o.total);
  return true;
}

// Takes as much of the frame out of the ring as is there; true when it moved something.
bool Engine::recv_step(P2pIn& i) {
  if (i.finished()) return false;
  Ring* r = ring(i.m->peer, me_);
  const std::uint8_t* data = ring_data(r);
  std::uint64_t tail = r->tail.load(std::memory_order_relaxed);
  std::uint64_t avail = r->head.load(std::memory_order_acquire) - tail;
  if (i.done == 0) {
    if (avail < kFrameHeader) return false;
    std::uint64_t h[kWords];
    std::memcpy(h, data + tail % layout_.ring_bytes, sizeof h);
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
    if (p < len) ring_copy_out(dst + p, data, layout_.ring_bytes, tail, static_cast<std::size_t>(std::min(n, len - p)));
    tail += n;
    i.done += n;
    avail -= n;
    r->tail.store(tail, std::memory_order_release);
    notify(i.m->peer);
  } while (avail > 0 && i.done < i.total);
  return true;
}

void Engine::check_frame(const P2pIn& i, const std::uint64_t* h) const {
  const P2pDesc& d = i.m->d;
  const int from = granks_[static_cast<std::size_t>(i.m->peer)];
  if (h[kWMagic] != kFrameMagic || (h[kWSeq] == d.seq && h[kWFp0] == d.fp0() && h[kWFp1] == d.fp1() &&
                                    h[kWLen] != d.bytes()))
    throw CollError(DTRAIN_ERR_INTERNAL, fmt::format("recv {} from rank {} on rank {}: corrupt frame in the "
                                                     "shared-memory ring",
                                                     d.text(), from, granks_[me_]));
  if (h[kWSeq] != d.seq || h[kWFp0] != d.fp0() || h[kWFp1] != d.fp1())
    throw CollError(DTRAIN_ERR_MISMATCH,
                    fmt::format("mismatched point-to-point calls: recv {} from rank {} on rank {} does not match "
                                "rank {}'s send {} to rank {} (messages between two ranks are matched in order; "
                                "tag, count and dtype must agree)",
                                d.text(), from, granks_[me_], from, describe_p2p(h[kWSeq], h[kWFp0], h[kWFp1]),
                                granks_[me_]));
}

void Engine::p2p_begin(P2pOut& o, P2pIn& i) {
  if (hdr_->abort_ready.load(std::memory_order_acquire) != 0) p2p_fail_peer(o, i, -1, "");
  auto& c = ctl_[me_];
  c.p2p_to.store(o.m ? o.m->peer : -1, std::memory_order_relaxed);
  c.p2p_from.store(i.m ? i.m->peer : -1, std::memory_order_relaxed);
  c.p2p_sseq.store(o.m ? o.m->d.seq : 0, std::memory_order_relaxed);
  c.p2p_rseq.store(i.m ? i.m->d.seq : 0, std::memory_order_relaxed);
  c.p2p_busy.store(1, std::memory_order_release);
}

void Engine::p2p_end() { ctl_[me_].p2p_busy.store(0, std::memory_order_release); }

bool Engine::p2p_step(P2pOut& o, P2pIn& i) {
  const bool a = send_step(o);
  return recv_step(i) || a;
}

void Engine::sendrecv(const P2pMsg* out, const P2pMsg* in) {
  P2pOut o{out};
  P2pIn i{in};
  p2p_begin(o, i);
  struct End {
    Engine& e;
    ~End() { e.p2p_end(); }
  } end{*this};
  while (!o.finished() || !i.finished())
    if (!p2p_step(o, i) && (!o.finished() || !i.finished())) p2p_wait(o, i);
}

Engine::Peek Engine::peek(int peer, std::uint64_t& fp0, std::uint64_t& fp1) {
  if (hdr_->abort_ready.load(std::memory_order_acquire) != 0) {
    P2pOut o;
    P2pIn i;
    p2p_fail_peer(o, i, -1, "");
  }
  const Ring* r = ring(peer, me_);
  const std::uint64_t tail = r->tail.load(std::memory_order_relaxed);
  if (r->head.load(std::memory_order_acquire) - tail < kFrameHeader) {
    const std::int32_t pid = ctl_[peer].pid.load();
    const bool dead = pid > 0 && pid != static_cast<std::int32_t>(::getpid()) && ::kill(pid, 0) != 0 && errno == ESRCH;
    if (!dead && ctl_[peer].state.load() != 1) return kNone;
    // Gone: a last look, it may have sent its message and left.
    return r->head.load(std::memory_order_acquire) - tail < kFrameHeader ? kGone : peek(peer, fp0, fp1);
  }
  std::uint64_t h[kWords];
  std::memcpy(h, ring_data(r) + tail % layout_.ring_bytes, sizeof h);
  if (h[kWMagic] != kFrameMagic) return kNone;
  fp0 = h[kWFp0];
  fp1 = h[kWFp1];
  return kMessage;
}

// True when p2p_step() would move something: room for the frame's next bytes, or data to take.
bool Engine::p2p_ready(const P2pOut& o, const P2pIn& i) const {
  if (!o.finished()) {
    const Ring* r = ring(me_, o.m->peer);
    const std::uint64_t used = r->head.load(std::memory_order_relaxed) - r->tail.load(std::memory_order_acquire);
    if (layout_.ring_bytes - used >= (o.done == 0 ? kFrameHeader : 1)) return true;
  }
  if (!i.finished()) {
    const Ring* r = ring(i.m->peer, me_);
    const std::uint64_t avail = r->head.load(std::memory_order_acquire) - r->tail.load(std::memory_order_relaxed);
    if (avail >= (i.done == 0 ? kFrameHeader : 1)) return true;
  }
  return false;
}

// The adaptive spin of the collectives (Engine::spin) on the positions, then one sleep slice on the
// doorbell (which an abort or a departing peer rings too).
void Engine::p2p_wait(P2pOut& o, P2pIn& i) {
  auto& c = ctl_[me_];
  const std::uint32_t seen = c.bell.load(std::memory_order_acquire);
  const auto t0 = Clock::now();
  if (spin([&] { return p2p_ready(o, i) || c.bell.load(std::memory_order_acquire) != seen; })) return;
  p2p_check(o, i);
  c.bell_sleepers.fetch_add(1, std::memory_order_seq_cst);
  if (!p2p_ready(o, i) && c.bell.load(std::memory_order_seq_cst) == seen)
    futex_wait(c.bell, seen, std::chrono::milliseconds(20));
  c.bell_sleepers.fetch_sub(1, std::memory_order_seq_cst);
  adapt_after_sleep(t0);
}

// Nothing moved: an abort record, a dead or departed peer (after a last look at its ring: it may
// have sent everything and left) or the deadline end the call.
void Engine::p2p_check(P2pOut& o, P2pIn& i) {
  if (hdr_->abort_ready.load(std::memory_order_acquire) != 0) p2p_fail_peer(o, i, -1, "");
  const auto self = static_cast<std::int32_t>(::getpid());
  for (const int peer : {o.finished() ? -1 : o.m->peer, i.finished() ? -1 : i.m->peer}) {
    if (peer < 0) continue;
    const std::int32_t pid = ctl_[peer].pid.load();
    const bool dead = pid > 0 && pid != self && ::kill(pid, 0) != 0 && errno == ESRCH;
    const bool left = ctl_[peer].state.load() == 1;
    if (!dead && !left) continue;
    if (p2p_step(o, i)) return;
    p2p_fail_peer(o, i, peer, dead ? fmt::format("(pid {}) died", pid) : "destroyed its communicator");
  }
  const auto deadline = std::min(o.finished() ? Clock::time_point::max() : o.m->d.deadline,
                                 i.finished() ? Clock::time_point::max() : i.m->d.deadline);
  if (Clock::now() < deadline) return;
  std::string waiting;
  if (!i.finished())
    waiting = fmt::format("rank {} has not sent it", granks_[static_cast<std::size_t>(i.m->peer)]);
  if (!o.finished())
    waiting += fmt::format("{}rank {} has not taken it ({} of {} bytes left in the ring)", waiting.empty() ? "" : "; ",
                           granks_[static_cast<std::size_t>(o.m->peer)],
                           o.total ? o.total - o.done : frame_bytes(o.m->d.bytes()),
                           o.total ? o.total : frame_bytes(o.m->d.bytes()));
  const int peer = !i.finished() ? i.m->peer : o.m->peer;
  throw CollError(DTRAIN_ERR_TIMEOUT, fmt::format("{} timed out after {} on rank {}: {}; rank {} is {}", p2p_call(o, i),
                                                  seconds_text((!i.finished() ? i.m : o.m)->d.timeout), granks_[me_], waiting,
                                                  granks_[static_cast<std::size_t>(peer)], peer_state(peer)));
}

std::string Engine::p2p_call(const P2pOut& o, const P2pIn& i) const {
  std::string s;
  if (o.m) s = fmt::format("send {} to rank {}", o.m->d.text(), granks_[static_cast<std::size_t>(o.m->peer)]);
  if (i.m)
    s += fmt::format("{}recv {} from rank {}", s.empty() ? "" : " with ", i.m->d.text(),
                     granks_[static_cast<std::size_t>(i.m->peer)]);
  return s;
}

// What local rank j is doing, for timeout messages.
std::string Engine::peer_state(int j) const {
  const auto& c = ctl_[j];
  if (c.p2p_busy.load() != 0) {
    const int to = c.p2p_to.load(), from = c.p2p_from.load();
    std::string s = "in ";
    if (to >= 0) s += fmt::format("send #{} to rank {}", c.p2p_sseq.load(), granks_[static_cast<std::size_t>(to)]);
    if (from >= 0)
      s += fmt::format("{}recv #{} from rank {}", to >= 0 ? " with " : "", c.p2p_rseq.load(),
                       granks_[static_cast<std::size_t>(from)]);
    return s;
  }
  const auto kind = static_cast<OpKind>(c.kind.load());
  if (c.busy.load() != 0) return fmt::format("in {} #{}", op_kind_name(kind), c.seq.load());
  return "not in a call of this communicator";
}

void Engine::p2p_fail_peer(const P2pOut& o, const P2pIn& i, int peer, const std::string& what) {
  if (peer < 0) {  // the abort record
    const int who = hdr_->abort_rank.load();
    auto st = static_cast<dtrain_status_t>(hdr_->abort_status.load());
    if (st == DTRAIN_SUCCESS) st = DTRAIN_ERR_PEER;
    const std::string call = o.m || i.m ? p2p_call(o, i) : std::string("point-to-point call");
    throw CollError(st, fmt::format("{} on rank {}: rank {} failed: {}", call, granks_[me_],
                                    granks_[static_cast<std::size_t>(who)], hdr_->abort_msg));
  }
  char host[256] = "this host";
  ::gethostname(host, sizeof host - 1);
  const bool sending = o.m && !o.finished() && o.m->peer == peer;
  throw CollError(DTRAIN_ERR_PEER, fmt::format("{} on rank {}: rank {} {} on host {} before it {}", p2p_call(o, i),
                                               granks_[me_], granks_[static_cast<std::size_t>(peer)], what, host,
                                               sending ? "took the message" : "sent the whole message"));
}

}  // namespace dtrain::coll::shm
