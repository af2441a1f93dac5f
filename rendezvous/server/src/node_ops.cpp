// HEARTBEAT, REPORT, WATCH, LEAVE, STATUS and LIST_RUNS on the wire, over the scope's liveness
// (liveness.hpp), event log (event_log.hpp), exit barrier (exit_barrier.hpp) and status (status.hpp).
#include "dtrain/common/log.hpp"
#include "handlers.hpp"
#include "server_state.hpp"
#include "liveness.hpp"
#include "dtrain/rendezvous/store/refused.hpp"
#include "scope.hpp"
#include "status.hpp"

namespace dtrain::rdzv::srv {

using wire::ErrorCode;
using wire::Frame;
using wire::Op;

namespace {

std::shared_ptr<const Bytes> ok_frame() { return std::make_shared<const Bytes>(wire::encode(Frame(Op::ok))); }

}  // namespace

void publish_event(Scope& s, EventKind kind, Event e) {
  const Event& ev = s.events.append(kind, std::move(e));
  release_all(std::exchange(s.watchers, {}),
              std::make_shared<const Bytes>(wire::encode(Frame(Op::value).bytes(pack_event(ev)))));
  if (kind != EventKind::lost) return;
  for (Conn* w : std::exchange(s.leavers, {})) {
    unpark(*w);
    send_error(*w, ErrorCode::lost,
               fmt::format("node {} ({}) was lost before the exit barrier: {}", ev.node, ev.host, ev.message));
  }
}

void declare_lost(Scope& s, Node& n, const std::string& why) {
  if (n.lost || n.left) return;
  n.lost = true;
  n.state = "lost";
  DTRAIN_WARN(rdzv, "rendezvous: run '{}': node {} ({}) lost: {}", s.run_id, n.rank, n.host, why);
  Event e;
  e.node = n.rank;
  e.host = n.host;
  e.message = why;
  publish_event(s, EventKind::lost, std::move(e));
}

void check_heartbeats(Scope& s, Clock::time_point now) {
  if (s.exit.finished() || s.events.fatal()) return;
  if (auto silent = first_silent(s.join, now)) declare_lost(s, *silent->node, silent->why);
}

void on_heartbeat(Conn& c, const Frame& f) {
  record_heartbeat(c.node, c.scope->join, f, Clock::now());
  send(c, Frame(Op::ok));
}

void on_report(Conn& c, const Frame& f) {
  Event e;
  e.node = int(f.i64_at(0));
  e.rank = int(f.i64_at(1));
  e.exit_code = int(f.i64_at(2));
  e.signal = int(f.i64_at(3));
  e.message = std::string(f.str_at(4).substr(0, 4096));
  if (c.node != nullptr) e.host = c.node->host;
  c.scope->charge_event(sizeof(Event) + e.message.size() + e.host.size());
  // an optional 6th argument: "stopped" when the node stops on its own (a signal, a time limit)
  bool stopped = f.args.size() > 5 && f.str_at(5) == "stopped";
  publish_event(*c.scope, stopped ? EventKind::stopped : EventKind::failure, std::move(e));
  send(c, Frame(Op::ok));
}

void on_watch(Conn& c, const Frame& f) {
  Scope& s = *c.scope;
  std::int64_t after = f.i64_at(0);
  std::int64_t t = f.i64_at(1);
  if (const Event* e = s.events.first_after(after)) return send(c, Frame(Op::value).bytes(pack_event(*e)));
  if (t <= 0) return send_error(c, ErrorCode::timeout, "no job event after 0 ms");
  s.watchers.push_back(&c);
  park(c, Park::watch, {}, t);
}

void watch_timed_out(Conn& c) {
  unpark(c);
  send_error(c, ErrorCode::timeout, fmt::format("no job event after {} ms", c.park_timeout_ms));
}

void on_leave(Conn& c, const Frame& f) {
  Scope& s = *c.scope;
  std::int64_t t = f.i64_at(0);
  if (c.node == nullptr || !s.join.closed())
    throw Refused(ErrorCode::not_joined, "leave from a connection that has not joined");
  if (!s.exit.leave(*c.node, s.join)) {
    s.leavers.push_back(&c);
    return park(c, Park::leave, {}, t);
  }
  auto ok = ok_frame();
  release_all(std::exchange(s.leavers, {}), ok);
  send_shared(c, ok);
}

void leave_timed_out(Conn& c) {
  Scope& s = *c.scope;
  unpark(c);
  send_error(c, ErrorCode::timeout, s.exit.timeout_text(s.join, c.park_timeout_ms));
}

void on_status(Conn& c, const Frame& f) {
  std::string run(f.str_at(0));
  if (run.empty()) run = c.hs.run_id();
  RunStatus st;
  st.run_id = run;
  if (const Scope* best = c.server->scopes.latest_with_nodes(run))
    st = run_status(run, best->generation, best->join, best->events, Clock::now());
  send(c, Frame(Op::value).bytes(pack_run_status(st)));
}

void on_list_runs(Conn& c, const Frame&) {
  Frame r(Op::value);
  for (const auto& run : c.server->scopes.runs_with_nodes()) r.str(run);
  send(c, r);
}

}  // namespace dtrain::rdzv::srv
