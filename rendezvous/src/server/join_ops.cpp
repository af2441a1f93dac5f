// JOIN and TABLE on the wire: joiners are parked until the scope's join barrier (join_barrier.hpp)
// closes, hear its progress about once a second, and each gets its own row of the rank table.
#include <utility>

#include "dtrain/common/log.hpp"
#include "handlers.hpp"
#include "hub.hpp"
#include "refused.hpp"
#include "scope.hpp"

namespace dtrain::rdzv::srv {

using wire::ErrorCode;
using wire::Frame;
using wire::Op;
using std::chrono::milliseconds;

namespace {

constexpr milliseconds kProgressEvery{1000};

// The last node arrived: rank everyone and answer every joiner (`last` was never parked).
void close_join(Scope& s, Conn& last) {
  s.join.close(Clock::now());
  auto joiners = std::move(s.joiners);
  s.joiners.clear();
  joiners.push_back(&last);
  for (Conn* w : joiners) {
    unpark(*w);
    send(*w, Frame(Op::value).bytes(pack_join_reply(s.join.reply_for(*w->node))));
  }
  DTRAIN_INFO(rdzv, "rendezvous: run '{}' generation {}: {} nodes joined, world size {}, master {}:{}", s.run_id,
              s.generation, s.join.instances(), s.join.world_size(), s.join.master_addr(), s.join.master_port());
}

// Nodes that run different jobs cannot become one: every node waiting in the barrier is refused
// with the same message as the one that found the difference, so that all of them exit at once.
void refuse_all(Scope& s, const Refused& r) {
  for (Conn* w : std::exchange(s.joiners, {})) {
    unpark(*w);
    if (Node* n = w->node) {
      w->node = nullptr;
      s.join.remove(*n);
    }
    send_error(*w, r.code, r.what());
  }
}

}  // namespace

void on_join(Conn& c, const Frame& f) {
  Scope& s = *c.scope;
  auto req = JoinRequest::parse(f);
  if (c.node != nullptr) throw Refused(ErrorCode::bad_request, "this connection already joined");
  try {
    c.node = &s.join.add(req, ip_of(c.peer));
  } catch (const Refused& r) {
    if (r.code == ErrorCode::spec_mismatch) refuse_all(s, r);
    throw;
  }
  if (s.join.full()) return close_join(s, c);
  s.joiners.push_back(&c);
  park(c, Park::join, {}, req.timeout_ms);
}

void on_table(Conn& c, const Frame&) {
  if (!c.scope->join.closed()) throw Refused(ErrorCode::not_joined, "the join barrier has not closed yet");
  send_shared(c, c.scope->join.table_frame());
}

void join_timed_out(Conn& c) {
  Scope& s = *c.scope;
  std::string text = s.join.missing_text();
  int joined = s.join.joined();
  int instances = s.join.instances();
  unpark(c);
  if (Node* n = c.node) {
    c.node = nullptr;
    s.join.remove(*n);
  }
  send_error(c, ErrorCode::timeout,
             fmt::format("join timed out after {:g} s: {} of {} nodes joined; {}", double(c.park_timeout_ms) / 1000.0,
                         joined, instances, text));
}

void send_join_progress(Scope& s, Clock::time_point now) {
  if (s.join.closed() || s.joiners.empty() || now - s.last_progress < kProgressEvery) return;
  s.last_progress = now;
  auto frame = std::make_shared<const Bytes>(
      wire::encode(Frame(Op::progress).i64(s.join.joined()).i64(s.join.instances()).str(s.join.missing_short())));
  for (Conn* w : Waiters(s.joiners)) send_shared(*w, frame);  // a copy: a failed write unparks w
}

}  // namespace dtrain::rdzv::srv
