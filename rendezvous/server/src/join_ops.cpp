// JOIN and TABLE on the wire: joiners are parked until the scope's join barrier (join_barrier.hpp)
// closes, hear its progress about once a second, and each gets its own row of the rank table.
// Elastic jobs: a barrier that may close with fewer than the max is closed from the tick once its
// last call is over; a node that joins a generation already running (or an older one) is sent to
// the next one with ERROR moved, and the running one ends with a "joined" event so that its nodes
// come too.
#include <optional>
#include <utility>

#include "dtrain/common/log.hpp"
#include "handlers.hpp"
#include "server_state.hpp"
#include "dtrain/rendezvous/store/refused.hpp"
#include "scope.hpp"

namespace dtrain::rdzv::srv {

using wire::ErrorCode;
using wire::Frame;
using wire::Op;
using std::chrono::milliseconds;

namespace {

constexpr milliseconds kProgressEvery{1000};

// The barrier is complete: rank everyone and answer every joiner (`last`, when given, was never parked).
void close_join(Scope& s, Conn* last) {
  s.join.close(Clock::now());
  auto joiners = std::move(s.joiners);
  s.joiners.clear();
  if (last != nullptr) joiners.push_back(last);
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

// A node for a running elastic generation: with room, the generation ends with a "joined" event.
// A node of another job is refused first: it must not stop this one.
void admit_later(Scope& run, const JoinRequest& req) {
  run.join.check_same_job(req);
  int alive = 0;
  for (const auto& n : run.join.nodes()) {
    if (n->left)
      throw Refused(ErrorCode::too_many_nodes, fmt::format("host {} cannot join run '{}': its nodes are finishing "
                                                           "(node {} on {} is done)", req.host, run.run_id, n->rank, n->host));
    if (!n->lost) ++alive;
  }
  if (alive >= run.join.max_instances())
    throw Refused(ErrorCode::too_many_nodes,
                  fmt::format("too many nodes: the elastic job runs with its maximum of {} nodes; host {} is one too many",
                              run.join.max_instances(), req.host));
  Event e;
  e.host = req.host;
  e.message = fmt::format("host {} joins: the job moves to generation {} with {} nodes", req.host, run.generation + 1,
                          alive + 1);
  run.charge_event(sizeof(Event) + e.message.size() + e.host.size());
  DTRAIN_INFO(rdzv, "rendezvous: run '{}' generation {}: {}", run.run_id, run.generation, e.message);
  publish_event(run, EventKind::joined, std::move(e));
}

void send_moved(Conn& c, std::int64_t generation, const std::string& why) {
  send(c, Frame(Op::error).i64(std::int64_t(ErrorCode::moved)).str(why).i64(generation));
}

// An elastic JOIN to a generation that is not the one gathering nodes: the generation to join
// instead (ending the running one with a "joined" event when there is room), or nullopt to join
// here. Refuses a job at its maximum or one whose nodes are finishing.
std::optional<std::int64_t> elastic_target(ServerState& server, const Scope& s, const JoinRequest& req) {
  Scope* latest = server.scopes.latest_with_nodes(s.run_id);
  if (latest == nullptr) return std::nullopt;  // the first node of the run
  std::int64_t target = latest->generation;
  if (latest->join.closed()) {
    target = latest->generation + 1;
    if (!latest->events.fatal()) admit_later(*latest, req);  // it runs: it ends, and its nodes come too
  }
  return target == s.generation ? std::nullopt : std::optional<std::int64_t>(target);
}

}  // namespace

void on_join(Conn& c, const Frame& f) {
  Scope& s = *c.scope;
  auto req = JoinRequest::parse(f);
  if (c.node != nullptr) throw Refused(ErrorCode::bad_request, "this connection already joined");
  if (req.elastic()) {
    if (auto to = elastic_target(*c.server, s, req)) return send_moved(c, *to, fmt::format("join generation {}", *to));
  }
  try {
    c.node = &s.join.add(req, ip_of(c.peer));
  } catch (const Refused& r) {
    if (r.code == ErrorCode::spec_mismatch) refuse_all(s, r);
    throw;
  }
  if (s.join.ready(Clock::now())) return close_join(s, &c);
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

void close_if_ready(Scope& s, Clock::time_point now) {
  if (!s.joiners.empty() && s.join.ready(now)) close_join(s, nullptr);
}

void send_join_progress(Scope& s, Clock::time_point now) {
  if (s.join.closed() || s.joiners.empty() || now - s.last_progress < kProgressEvery) return;
  s.last_progress = now;
  auto frame = std::make_shared<const Bytes>(
      wire::encode(Frame(Op::progress).i64(s.join.joined()).i64(s.join.instances()).str(s.join.missing_short())));
  for (Conn* w : Waiters(s.joiners)) send_shared(*w, frame);  // a copy: a failed write unparks w
}

}  // namespace dtrain::rdzv::srv
