// Communicator::sendrecv: point-to-point messages. Each call is checked here (peer, dtype, tag,
// buffers: DTRAIN_ERR_INVALID_ARGUMENT, nothing sent, the communicator stays usable), numbered per
// ordered pair (the n-th send to a peer is the n-th message that peer receives from this rank) and
// carried by the engine; a message to this rank itself is copied into a queue that its receives
// take from, in order, with the same checks. A failure inside the engine fails the communicator like
// a failed collective.
#include <cstring>

#include <fmt/format.h>

#include "comm.hpp"

namespace dtrain::coll {

void Communicator::check_p2p(const P2pArgs& a, const char* what) const {
  if (a.peer < 0 || a.peer >= size())
    throw CollError(DTRAIN_ERR_INVALID_ARGUMENT,
                    fmt::format("{}: peer {} is not a rank of this communicator (0..{})", what, a.peer, size() - 1));
  if (!valid_dtype(a.dtype))
    throw CollError(DTRAIN_ERR_INVALID_ARGUMENT, fmt::format("{}: invalid dtype {}", what, static_cast<int>(a.dtype)));
  if (a.tag < 0)
    throw CollError(DTRAIN_ERR_INVALID_ARGUMENT, fmt::format("{}: tag {} is negative (tags are 0..INT_MAX)", what, a.tag));
  const void* buf = a.src != nullptr ? a.src : a.dst;
  if (buf == nullptr && a.count != 0 && !a.device)
    throw CollError(DTRAIN_ERR_INVALID_ARGUMENT, fmt::format("{}: the buffer is NULL with a count of {}", what, a.count));
}

P2pMsg Communicator::message(const P2pArgs& a, bool sending) {
  P2pMsg m;
  m.peer = a.peer;
  m.src = a.src;
  m.dst = a.dst;
  m.d.seq = ++(sending ? sent_ : received_)[static_cast<std::size_t>(a.peer)];
  m.d.tag = a.tag;
  m.d.count = a.count;
  m.d.dtype = a.dtype;
  m.d.device = a.device;
  m.d.deadline = coarse_now() + cfg_.timeout;
  m.d.timeout = cfg_.timeout;
  return m;
}

void Communicator::to_self(const P2pMsg& m) {
  Queued q{m.d, {}};
  if (m.d.bytes()) {
    const auto* p = static_cast<const std::uint8_t*>(m.src);
    q.bytes.assign(p, p + m.d.bytes());
  }
  self_.push_back(std::move(q));
}

void Communicator::from_self(const P2pMsg& m) {
  const Queued& q = self_.front();
  if (q.d.fp0() != m.d.fp0() || q.d.fp1() != m.d.fp1())
    throw CollError(DTRAIN_ERR_MISMATCH,
                    fmt::format("mismatched point-to-point calls: recv {} from rank {} (itself) does not match its "
                                "send {} to itself (messages are matched in order; tag, count and dtype must agree)",
                                m.d.text(), world_rank(rank_), q.d.text()));
  if (m.d.bytes()) std::memcpy(m.dst, q.bytes.data(), m.d.bytes());
  self_.pop_front();
}

void Communicator::from_parked(const P2pMsg& m) {
  auto& box = parked_[static_cast<std::size_t>(m.peer)];
  const Queued& q = box.front();
  if (q.d.fp0() != m.d.fp0() || q.d.fp1() != m.d.fp1())
    throw CollError(DTRAIN_ERR_MISMATCH,
                    fmt::format("mismatched point-to-point calls: recv {} from rank {} on rank {} does not match "
                                "rank {}'s send {} to rank {} (messages between two ranks are matched in order; "
                                "tag, count and dtype must agree)",
                                m.d.text(), world_rank(m.peer), world_rank(rank_), world_rank(m.peer), q.d.text(),
                                world_rank(rank_)));
  if (m.d.bytes()) std::memcpy(m.dst, q.bytes.data(), m.d.bytes());
  box.pop_front();
}

void Communicator::sendrecv(const P2pArgs* send, const P2pArgs* recv) {
  check_usable();
  if (send != nullptr) check_p2p(*send, "send");
  if (recv != nullptr) check_p2p(*recv, "recv");
  const bool self_out = send != nullptr && send->peer == rank_;
  const bool self_in = recv != nullptr && recv->peer == rank_;
  if (self_in && self_.empty() && !self_out)
    throw CollError(DTRAIN_ERR_INVALID_ARGUMENT,
                    fmt::format("recv from rank {} (itself, tag {}): no message to itself is waiting, so it could "
                                "never arrive; send to itself first (a send to itself never blocks)",
                                world_rank(rank_), recv->tag));
  // A message a collective parked was numbered then: it keeps its number.
  const bool parked_in = recv != nullptr && !self_in && !parked_[static_cast<std::size_t>(recv->peer)].empty();
  P2pMsg out, in;
  if (send != nullptr) out = message(*send, true);
  if (recv != nullptr) {
    in = message(*recv, false);
    if (parked_in) {
      --received_[static_cast<std::size_t>(recv->peer)];
      in.d.seq = parked_[static_cast<std::size_t>(recv->peer)].front().d.seq;
    }
  }
  run(nullptr, [&] {
    if (self_out) to_self(out);
    if (self_in) from_self(in);
    if (parked_in) from_parked(in);
    const P2pMsg* o = send != nullptr && !self_out ? &out : nullptr;
    const P2pMsg* i = recv != nullptr && !self_in && !parked_in ? &in : nullptr;
    if (o != nullptr || i != nullptr) engine_->sendrecv(o, i);
  });
}

}  // namespace dtrain::coll
