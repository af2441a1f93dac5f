// A communicator's point-to-point streams (mailbox.hpp).
#include "mailbox.hpp"

#include <cstring>

#include <fmt/format.h>

namespace dtrain::coll {

int coll_tag(OpKind kind, int root) { return -1 - (static_cast<int>(kind) + 256 * root); }

Mailbox::Mailbox(std::vector<int> world, int rank)
    : world_(std::move(world)),
      rank_(rank),
      sent_(world_.size(), 0),
      received_(world_.size(), 0),
      parked_(world_.size()) {}

P2pMsg Mailbox::numbered(const P2pArgs& a, bool sending, Clock::time_point deadline,
                         std::chrono::milliseconds timeout) {
  P2pMsg m;
  m.peer = a.peer;
  m.src = a.src;
  m.dst = a.dst;
  m.d.seq = ++(sending ? sent_ : received_)[static_cast<std::size_t>(a.peer)];
  m.d.tag = a.tag;
  m.d.count = a.count;
  m.d.dtype = a.dtype;
  m.d.device = a.device;
  m.d.deadline = deadline;
  m.d.timeout = timeout;
  return m;
}

Mailbox::Post Mailbox::post(const P2pArgs* send, const P2pArgs* recv, Clock::time_point deadline,
                            std::chrono::milliseconds timeout) {
  Post p;
  p.sending = send != nullptr;
  p.receiving = recv != nullptr;
  p.self_out = p.sending && send->peer == rank_;
  p.self_in = p.receiving && recv->peer == rank_;
  if (p.self_in && self_.empty() && !p.self_out)
    throw CollError(DTRAIN_ERR_INVALID_ARGUMENT,
                    fmt::format("recv from rank {} (itself, tag {}): no message to itself is waiting, so it could "
                                "never arrive; send to itself first (a send to itself never blocks)",
                                world_[static_cast<std::size_t>(rank_)], recv->tag));
  p.parked_in = p.receiving && !p.self_in && !parked_[static_cast<std::size_t>(recv->peer)].empty();
  if (p.sending) p.out = numbered(*send, true, deadline, timeout);
  if (p.receiving) {
    p.in = numbered(*recv, false, deadline, timeout);
    if (p.parked_in) {  // a message a collective parked was numbered then: it keeps its number
      --received_[static_cast<std::size_t>(recv->peer)];
      p.in.d.seq = parked_[static_cast<std::size_t>(recv->peer)].front().d.seq;
    }
  }
  return p;
}

void Mailbox::deliver(Engine& engine, const Post& p) {
  if (p.self_out) {
    Queued q{p.out.d, {}};
    if (p.out.d.bytes()) {
      const auto* b = static_cast<const std::uint8_t*>(p.out.src);
      q.bytes.assign(b, b + p.out.d.bytes());
    }
    self_.push_back(std::move(q));
  }
  if (p.self_in) from_queue(self_, p.in, true);
  if (p.parked_in) from_queue(parked_[static_cast<std::size_t>(p.in.peer)], p.in, false);
  const P2pMsg* o = p.sending && !p.self_out ? &p.out : nullptr;
  const P2pMsg* i = p.receiving && !p.self_in && !p.parked_in ? &p.in : nullptr;
  if (o != nullptr || i != nullptr) engine.sendrecv(o, i);
}

void Mailbox::from_queue(std::deque<Queued>& queue, const P2pMsg& m, bool itself) {
  const Queued& q = queue.front();
  const int me = world_[static_cast<std::size_t>(rank_)], from = world_[static_cast<std::size_t>(m.peer)];
  if (q.d.fp0() != m.d.fp0() || q.d.fp1() != m.d.fp1()) {
    if (itself)
      throw CollError(DTRAIN_ERR_MISMATCH,
                      fmt::format("mismatched point-to-point calls: recv {} from rank {} (itself) does not match its "
                                  "send {} to itself (messages are matched in order; tag, count and dtype must agree)",
                                  m.d.text(), me, q.d.text()));
    throw CollError(DTRAIN_ERR_MISMATCH,
                    fmt::format("mismatched point-to-point calls: recv {} from rank {} on rank {} does not match "
                                "rank {}'s send {} to rank {} (messages between two ranks are matched in order; "
                                "tag, count and dtype must agree)",
                                m.d.text(), from, me, from, q.d.text(), me));
  }
  if (m.d.bytes()) std::memcpy(m.dst, q.bytes.data(), m.d.bytes());
  queue.pop_front();
}

P2pMsg Mailbox::coll_msg(const OpDesc& d, int peer, bool sending, const void* buf, std::size_t count) {
  P2pArgs a;
  a.src = sending ? buf : nullptr;
  a.dst = sending ? nullptr : const_cast<void*>(buf);
  a.count = count;
  a.dtype = d.dtype;
  a.peer = peer;
  a.tag = coll_tag(d.kind, d.root);
  return numbered(a, sending, d.deadline, d.timeout());
}

void Mailbox::park_user_messages(Engine& engine, const OpDesc& d, int peer) {
  for (;;) {
    std::uint64_t fp0 = 0, fp1 = 0;
    if (engine.peek(peer, fp0, fp1) != Engine::kMessage) return;
    const auto tag = static_cast<int>(static_cast<std::uint32_t>(fp1 >> 32));
    if (tag < 0) return;  // a collective's message: the one this call receives next
    P2pMsg m;
    m.peer = peer;
    m.d.seq = ++received_[static_cast<std::size_t>(peer)];
    m.d.tag = tag;
    m.d.count = fp0;
    m.d.dtype = static_cast<dtrain_dtype_t>(fp1 & 0xff);
    m.d.device = ((fp1 >> 8) & 0xff) != 0;
    m.d.deadline = d.deadline;
    m.d.timeout = d.timeout();
    Queued q{m.d, std::vector<std::uint8_t>(m.d.bytes())};
    m.dst = q.bytes.data();
    engine.sendrecv(nullptr, &m);
    parked_[static_cast<std::size_t>(peer)].push_back(std::move(q));
  }
}

}  // namespace dtrain::coll
