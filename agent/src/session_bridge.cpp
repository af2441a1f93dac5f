// SessionBridge (session_bridge.hpp): job events in, agent events and session calls out.
#include "session_bridge.hpp"

#include <algorithm>
#include <cstdio>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/exit_codes.hpp"
#include "dtrain/rendezvous/membership/node_session.hpp"
#include "failure_report.hpp"
#include "job_machine.hpp"
#include "visible_text.hpp"

namespace dtrain::agent::bridge {
namespace {

template <class... F>
struct Overload : F... {
  using F::operator()...;
};
template <class... F>
Overload(F...) -> Overload<F...>;

// A failure event's text where it ends the job ("root cause: node 1 (h1): rank 3 ...").
std::string ending_reason(const rdzv::Event& e, const std::string& reason) {
  return e.kind == "failure" && e.rank >= 0 ? "root cause: " + reason : reason;
}

std::string late_message(int code, const std::string& reason) {
  return fmt::format("the job failed after this node's workers finished (exit status {}): {}", code, reason);
}

}  // namespace

std::string failure_message(const WorkerExit& w) {
  constexpr std::size_t kLineMax = 240, kTotalMax = 2400;
  std::string out = fmt::format("local rank {}, pid {}", w.local_rank, w.pid);
  if (!w.hang.empty()) return fmt::format("{}{}{}", out, rdzv::kHungReport, w.describe().substr(4));  // rdzv::hung_report
  if (w.peer_failure)  // rdzv::kSawPeerFail: the rendezvous and the other nodes read it
    out += *w.peer_failure >= 0 ? fmt::format(" {}rank {} fail)", rdzv::kSawPeerFail, *w.peer_failure)
                                : fmt::format(" {}a peer fail)", rdzv::kSawPeerFail);
  Evidence ev = evidence_of(w);
  if (ev.lines.empty()) return out;
  // the first line (a traceback's header) and as many of the last as fit: the end counts most
  std::string first = "\n    | " + visible_line(ev.lines.front(), kLineMax), tail;
  for (std::size_t i = ev.lines.size(); i-- > 1;) {
    std::string line = "\n    | " + visible_line(ev.lines[i], kLineMax);
    if (first.size() + tail.size() + line.size() > kTotalMax) {
      first += "\n    | ...";
      break;
    }
    tail = line + tail;
  }
  if (first.size() + tail.size() > kTotalMax) first.clear();
  return out + "; " + ev.heading + ":" + first + tail;
}

std::optional<int> reported_peer_failure(const std::string& message) {
  std::string head = message.substr(0, message.find('\n'));
  auto at = head.find(rdzv::kSawPeerFail);
  if (at == std::string::npos) return std::nullopt;
  int rank = -1;
  if (std::sscanf(head.c_str() + at, "(its collectives saw rank %d fail)", &rank) == 1) return rank;
  return -1;
}

std::optional<rdzv::Event> agreed_root(const std::vector<rdzv::Event>& failures) {
  for (const auto& e : failures)
    if (!rdzv::saw_peer_fail(e)) return e;
  return std::nullopt;
}

WorkerExit remote_exit(const rdzv::Event& e) {
  WorkerExit w;
  w.remote = true;
  w.rank = e.rank;
  w.node_rank = e.node;
  w.host = e.host;
  w.exit_code = e.exit_code;
  w.signal = e.signal;
  std::string head = e.message.substr(0, e.message.find('\n'));
  int local = -1;
  long pid = 0;
  if (std::sscanf(head.c_str(), "local rank %d, pid %ld", &local, &pid) == 2) w.local_rank = local, w.pid = pid;
  if (auto p = reported_peer_failure(e.message)) w.peer_failure = p;
  auto semi = head.find("; ");
  std::string heading = semi == std::string::npos ? "" : head.substr(semi + 2);
  if (rdzv::hung_report(e)) {  // "hung (state T stopped): never reached ..."
    auto colon = heading.find("): ");
    bool state = heading.rfind("hung (state ", 0) == 0 && colon != std::string::npos;
    w.hang_state = state ? heading.substr(12, colon - 12) : "";
    w.hang = state ? heading.substr(colon + 3) : heading.substr(std::min(heading.size(), std::size_t(6)));
    return w;
  }
  if (!heading.empty() && heading.back() == ':') heading.pop_back();
  if (heading.empty() && semi == std::string::npos && local < 0) heading = head;  // not an agent's report
  if (heading.empty()) return w;
  w.report.push_back(heading);
  std::size_t at = e.message.find('\n');
  while (at != std::string::npos) {
    std::size_t next = e.message.find('\n', at + 1);
    std::string line = e.message.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1);
    if (line.rfind("    | ", 0) == 0) line.erase(0, 6);
    w.report.push_back(line);
    at = next;
  }
  return w;
}

std::string stop_message(const SelfStop& s) {
  if (s.signal != 0) return fmt::format("interrupted ({})", signal_name(s.signal));
  return "stopped: " + s.reason;
}

std::optional<Event> agent_event_for(const rdzv::Event& e, const std::string& endpoint, bool elastic) {
  Event ev;
  ev.node_rank = e.node;
  if (e.kind == "stopped") {  // that node stopped on its own: every node ends as it does
    ev.kind = Event::Kind::abort;
    ev.exit_code = e.exit_code != 0 ? e.exit_code : exit_code::internal;
    ev.reason = rdzv::describe_event(e);
    return ev;
  }
  if (e.kind == "failure") {
    // rank -1: that node's agent itself failed before any worker ran (its command cannot be executed
    // there); a restart cannot mend that, so every node ends with its status
    // a rank the job hung on: every node ends as hung (70), none restarts
    ev.kind = e.rank < 0 || rdzv::hung_report(e) ? Event::Kind::abort : Event::Kind::peer_failed;
    ev.exit_code = e.signal != 0 ? exit_code::signal_base + e.signal : e.exit_code;
    // its first line only (of a hang, all of it): the summary shows the rest once, at the end
    rdzv::Event head = e;
    if (e.rank >= 0)
      head.message = e.message.substr(0, rdzv::hung_report(e) ? e.message.find('\n')
                                                               : std::min(e.message.find('\n'), e.message.find("; ")));
    ev.reason = rdzv::describe_event(head);  // the root cause is named once the nodes agree
    return ev;
  }
  if (e.kind == "joined") {  // elastic: a node waits for the next generation
    ev.kind = Event::Kind::membership;
    ev.generation = int(e.generation) + 1;
    ev.reason = e.message;
    return ev;
  }
  if (e.kind == "lost" && elastic && e.node >= 0) {  // the nodes left go on in the next generation
    ev.kind = Event::Kind::peer_failed;
    ev.exit_code = exit_code::node_lost;
    ev.reason = rdzv::describe_event(e) + "; the elastic job goes on with the nodes left";
    return ev;
  }
  if (e.kind == "lost") {
    ev.kind = Event::Kind::node_lost;
    ev.exit_code = exit_code::node_lost;
    // the built-in rendezvous lives in node 0's agent (or a `dtrain rendezvous serve` host); etcd in none
    const char* who = endpoint.rfind("etcd", 0) == 0 ? "" : " (node 0's agent or the rendezvous host is gone)";
    ev.reason = e.node < 0 ? fmt::format("lost the rendezvous at {}{}: {}", endpoint, who, e.message)
                           : rdzv::describe_event(e);
    return ev;
  }
  return std::nullopt;
}

BarrierDone barrier_outcome(const std::optional<rdzv::Event>& cause, const std::string& endpoint) {
  if (!cause) return {exit_code::ok, ""};
  auto ev = agent_event_for(*cause, endpoint);
  if (!ev) return {exit_code::internal, fmt::format("exit barrier ended by a '{}' event", cause->kind)};
  return {ev->exit_code != 0 ? ev->exit_code : 1, ending_reason(*cause, ev->reason)};
}

BarrierDone barrier_failure(const std::exception& e) {
  if (dynamic_cast<const rdzv::NodeLostError*>(&e) != nullptr)
    return {exit_code::node_lost, fmt::format("exit barrier: {}", e.what())};
  if (dynamic_cast<const TimeoutError*>(&e) != nullptr) return {exit_code::rdzv_timeout, e.what()};
  return {exit_code::internal, fmt::format("exit barrier: {}", e.what())};
}

JoinFailed join_failure(int generation, const std::exception& e) {
  if (dynamic_cast<const rdzv::Cancelled*>(&e) != nullptr) return {generation, 0, e.what(), true};
  return {generation, exit_status_of(e), e.what(), false};
}

SessionBridge::Fate SessionBridge::fate(int generation) const {
  if (generation > fate_generation_) return Fate::open;
  return generation == fate_generation_ ? fate_ : Fate::self_stop;  // older ones: over, whatever they were
}

bool SessionBridge::decide(int generation, Fate f) {
  if (fate(generation) != Fate::open) return false;
  fate_generation_ = generation;
  fate_ = f;
  remote_.reset();
  return true;
}

std::vector<Action> SessionBridge::on(const Input& in) {
  if (phase_ == Phase::ended) return {};
  return std::visit(Overload{
                        [this](const AgentState& x) { return on_state(x); },
                        [this](const LocalFailure& x) { return on_local_failure(x); },
                        [this](const SelfStopped& x) { return on_self_stop(x); },
                        [this](const JobEvent& x) { return on_job_event(x); },
                        [this](const Joined& x) { return on_joined(x); },
                        [this](const JoinFailed& x) { return on_join_failed(x); },
                        [this](const AgentDone& x) { return on_agent_done(x); },
                        [this](const BarrierDone& x) { return on_barrier_done(x); },
                        [this](const SettleOver&) { return on_settle_over(); },
                    },
                    in);
}

std::vector<Action> SessionBridge::on_state(const AgentState& in) {
  std::vector<Action> out;
  if (phase_ == Phase::running)
    out.push_back(Publish{state_name(in.state), in.state == JobState::running ? cfg_.slots : 0, in.generation});
  switch (in.state) {
    case JobState::starting:
      // the agent waits for the go of a new generation: re-join under it
      if (in.generation > generation_ && phase_ != Phase::barrier) {
        generation_ = in.generation;
        phase_ = Phase::joining;
        out.push_back(Rejoin{in.generation});
      }
      break;
    case JobState::stopping:
      // no job event and no local failure before it: a signal or max_runtime_s stops this node
      decide(in.generation, Fate::self_stop);
      break;
    case JobState::done:
      agent_done_ = true;
      break;
    case JobState::restarting:
      restarted_ = true;  // the generation's failure led to a restart: it no longer ends the job
      break;
    case JobState::running:
      break;
  }
  return out;
}

std::vector<Action> SessionBridge::on_local_failure(const LocalFailure& in) {
  decide(in.generation, Fate::local_failure);
  if (phase_ != Phase::running || in.generation != generation_) return {};
  const WorkerExit& w = in.exit;
  // the other nodes must hear of it before anything else: it is the root cause everywhere
  return {Report{w.rank, w.signal != 0 ? 0 : w.status(), w.signal, failure_message(w)}};
}

std::vector<Action> SessionBridge::on_self_stop(const SelfStopped& in) {
  if (!decide(in.generation, Fate::self_stop)) return {};  // a failure decided it: that is the cause
  if (phase_ != Phase::running || in.generation != generation_) return {};
  return {ReportStop{in.stop.exit_code, in.stop.signal, stop_message(in.stop)}};
}

std::vector<Action> SessionBridge::on_job_event(const JobEvent& in) {
  // in the barrier NodeSession::finish() answers for the events; other generations are over
  if ((phase_ != Phase::running && phase_ != Phase::settling) || in.generation != generation_) return {};
  const rdzv::Event& e = in.event;
  if (first_kind_.empty()) first_kind_ = e.rank < 0 && e.kind == "failure" ? "agent failure" : e.kind;
  if (e.kind == "failure" && e.rank >= 0) failures_.push_back(e);
  if (phase_ == Phase::settling) {
    if (first_kind_ != "failure") return on_settle_over();  // a stop or a loss came first: it stands
    auto root = agreed_root(failures_);
    return root ? settled(*root) : std::vector<Action>{};
  }
  auto ev = agent_event_for(e, cfg_.endpoint, cfg_.elastic);
  if (!ev) return {};
  if (e.kind == "failure" && e.node == cfg_.node_rank) {
    decide(in.generation, Fate::local_failure);  // our own report: the agent is stopping already
    return {};
  }
  if (!decide(in.generation, Fate::remote_failure)) return {};
  remote_ = BarrierDone{ev->exit_code != 0 ? ev->exit_code : 1, ending_reason(e, ev->reason)};
  if (agent_done_) return {};  // too late for the agent: AgentDone(0) makes it a late failure
  return {Post{*ev}};
}

std::vector<Action> SessionBridge::on_joined(const Joined& in) {
  if (in.generation != generation_) failures_.clear(), first_kind_.clear(), restarted_ = false;
  generation_ = in.generation;
  if (in.node_rank >= 0) cfg_.node_rank = in.node_rank;
  phase_ = Phase::running;
  if (agent_done_) return {};  // the agent ended while we joined: AgentDone decides
  return {StartMonitoring{in.generation}, Post{Event::go(in.generation, in.master_port, in.plan)}};
}

std::vector<Action> SessionBridge::on_join_failed(const JoinFailed& in) {
  generation_ = in.generation;
  phase_ = Phase::detached;
  if (in.cancelled || agent_done_) return {};
  Event abort;
  abort.kind = Event::Kind::abort;
  abort.exit_code = in.exit_code;
  abort.reason = fmt::format("re-joining the rendezvous for generation {}: {}", in.generation, in.reason);
  return {Post{abort}};
}

std::vector<Action> SessionBridge::on_agent_done(const AgentDone& in) {
  agent_done_ = true;
  if (in.exit_code == exit_code::ok && phase_ == Phase::running) {
    if (fate(generation_) == Fate::remote_failure && remote_) return on_barrier_done(*remote_);
    phase_ = Phase::barrier;
    return {ExitBarrier{cfg_.barrier_limit}};
  }
  std::vector<Action> out;
  out.reserve(2);  // (also keeps GCC's -Wmaybe-uninitialized quiet about the variant's relocation)
  // the agent failed with no worker to blame and no job event behind it (its command cannot run on
  // this node): tell the others, as rank -1, so that they stop with this cause instead of
  // restarting or seeing this node as lost
  if (in.exit_code != exit_code::ok && phase_ == Phase::running && fate(generation_) == Fate::open)
    out.push_back(Report{-1, in.exit_code, 0, in.reason});
  // a worker failure ended the job: every node names the same root cause, once it is known
  Fate f = fate(generation_);
  if (in.exit_code != exit_code::ok && phase_ == Phase::running && !restarted_ &&
      (f == Fate::local_failure || (f == Fate::remote_failure && first_kind_ == "failure"))) {
    if (first_kind_ == "failure")
      if (auto root = agreed_root(failures_)) return settled(*root);
    phase_ = Phase::settling;
    agent_code_ = in.exit_code;
    out.push_back(Settle{cfg_.settle_limit});
    return out;
  }
  phase_ = Phase::ended;
  out.push_back(End{in.exit_code, ""});
  return out;
}

std::vector<Action> SessionBridge::settled(const rdzv::Event& root) {
  phase_ = Phase::ended;
  int code = root.signal != 0 ? exit_code::signal_base + root.signal : root.exit_code;
  return {End{code != 0 ? code : 1, "", root}};
}

// No failure of its own came: the first failure stands (every node waited as long).
std::vector<Action> SessionBridge::on_settle_over() {
  if (phase_ != Phase::settling) return {};
  if (first_kind_ == "failure" && !failures_.empty()) return settled(failures_.front());
  phase_ = Phase::ended;
  return {End{agent_code_, ""}};
}

std::vector<Action> SessionBridge::on_barrier_done(const BarrierDone& in) {
  phase_ = Phase::ended;
  return {End{in.exit_code, in.exit_code == exit_code::ok ? "" : late_message(in.exit_code, in.reason)}};
}

}  // namespace dtrain::agent::bridge
