#pragma once
// SessionBridge: the pure state machine between this node's NodeSession (the job events of the other
// nodes and of the rendezvous) and its Agent (local state, local failures, the end of its run). It
// owns no thread and no socket: ControlThread (control_thread.hpp) feeds it Inputs in arrival order
// and performs the Actions it returns; tests/agent/test_session_bridge.cpp drives it directly.
//
// Membership phases:
//   joining(g) --Joined--> running(g) --AgentState(starting, g+1)--> joining(g+1)   (a restart)
//   joining(g) --JoinFailed--> detached          (the agent is aborted with the join's error)
//   running(g) --AgentDone(0)--> barrier --BarrierDone--> ended
//   running(g) --AgentDone(!=0), a worker failure, its root cause not known yet--> settling
//              --JobEvent(the root cause) or SettleOver--> ended
//   any        --AgentDone(!=0)--> ended
// The fate of a generation is decided once, by whichever comes first: a local worker failure (it is
// reported; the others follow), a failure or loss elsewhere (posted to the agent), or this node
// stopping on its own (a signal, max_runtime_s: its exit status stands, and a loss seen afterwards is
// a consequence of it). A remote failure that the agent did not act on before it ended with 0 is a
// late failure: the node exits with that status instead of entering the exit barrier. In the barrier,
// NodeSession::finish() itself watches for failures and losses.
//
// A node that stops on its own (SelfStopped: Ctrl-C, SIGTERM, max_runtime_s, a hang) tells the others
// with ReportStop before its agent ends: they see a "stopped" event ("node 1 interrupted (SIGINT)")
// and end with the same status (130, 143, 124, 70), not as a lost node. A local failure's Report
// carries the last lines of the failing rank's stderr (bounded), so every node's summary shows them.
// A spec or shape mismatch between nodes is found by the rendezvous at the join (every node there is
// refused with the fields that differ), before the bridge runs.
//
// The root cause every node names: when a worker failure ended the job, the bridge picks it from
// the generation's failure events, which every node receives in the rendezvous's order
// (agreed_root: the first whose rank failed by itself, not one whose collectives only saw a peer
// fail). A node whose failures so far are all of the second kind waits (Settle, settle_limit) for
// the peer's own report, then ends with it, or with the first failure when none came. End carries
// that event; the node's summary and exit status are its (multinode.cpp).
//
// A hang whose rank this node has (a stopped rank, or the one furthest behind) is reported as that
// rank's failure, its message beginning with rdzv::kHungReport: every node ends with 70 (an abort,
// never a restart) and names that rank (remote_exit fills WorkerExit::hang).
//
// Elastic jobs: a "lost" event is a failure that restarts the job (within the restart budget) with
// the nodes left, and a "joined" event (a node waits for the next generation) posts
// Event::Kind::membership; either way the AgentState(starting) -> Rejoin -> Joined path re-runs the
// join barrier, and Joined carries the generation's plan (node rank, world size, batch) to the go.
#include <chrono>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "dtrain/agent/events.hpp"
#include "dtrain/agent/job_state.hpp"
#include "dtrain/agent/worker_exit.hpp"
#include "dtrain/rendezvous/membership/records.hpp"

namespace dtrain::agent::bridge {

// ---- inputs --------------------------------------------------------------------------------------
struct AgentState {  // AgentHooks::on_state
  JobState state;
  int generation;
};
struct LocalFailure {  // AgentHooks::on_local_failure
  WorkerExit exit;
  int generation;
};
struct SelfStopped {  // AgentHooks::on_self_stop
  SelfStop stop;
  int generation;
};
struct JobEvent {  // NodeSession's on_event, from the monitoring of `generation`
  rdzv::Event event;
  int generation;
};
struct Joined {  // a (re-)join of `generation` succeeded
  int generation;
  int master_port;
  int node_rank = -1;                          // this node's rank in it
  std::shared_ptr<const config::Plan> plan{};  // elastic: the generation's plan (null: unchanged)
};
struct JoinFailed {  // a re-join failed (or was cancelled because the agent ended)
  int generation;
  int exit_code;
  std::string reason;
  bool cancelled = false;
};
struct AgentDone {  // Agent::run() returned (or threw)
  int exit_code;
  std::string reason;
};
struct BarrierDone {  // the exit barrier ended: 0 every node finished, else why not
  int exit_code;
  std::string reason;
};
struct SettleOver {};  // the wait for the failure that settles the root cause (Settle) ended
using Input = std::variant<AgentState, LocalFailure, SelfStopped, JobEvent, Joined, JoinFailed, AgentDone, BarrierDone,
                           SettleOver>;

// ---- actions -------------------------------------------------------------------------------------
struct StartMonitoring {  // heartbeats and job events of `generation`
  int generation = 0;
};
struct Post {  // Agent::post
  Event event;
};
struct Publish {  // NodeSession::set_local_state
  std::string state;
  int running = 0;
  int generation = 0;
};
struct Report {  // NodeSession::report_failure; rank -1: the agent itself failed
  int rank = 0;
  int exit_code = 0;
  int signal = 0;
  std::string message;
};
struct ReportStop {  // NodeSession::report_stop: this node stops on its own
  int exit_code = 0;
  int signal = 0;
  std::string message;  // "interrupted (SIGINT)", "stopped: max_runtime_s 5 passed"
};
struct Rejoin {  // NodeSession::rejoin; answers with Joined or JoinFailed
  int generation = 0;
};
struct ExitBarrier {  // NodeSession::finish; answers with BarrierDone
  std::chrono::milliseconds limit{0};
};
struct End {  // this node's exit status; `message` (when not empty) goes to stderr as "dtrain: ..."
  int exit_code = 0;
  std::string message;
  std::optional<rdzv::Event> root{};  // the failure every node agreed on as the root cause
};
struct Settle {  // wait this long for more job events, then feed SettleOver
  std::chrono::milliseconds limit{0};
};
using Action = std::variant<StartMonitoring, Post, Publish, Report, ReportStop, Rejoin, ExitBarrier, End, Settle>;

struct BridgeConfig {
  int node_rank = 0;        // this node's rank (from the first join)
  int slots = 1;            // local workers (published as running)
  std::string endpoint;     // the rendezvous, for messages
  std::chrono::milliseconds barrier_limit{0};
  bool elastic = false;     // a lost node or one that joins restarts the job instead of ending it
  // how long a failed node waits for the failure that its failures reported (a peer's own failure)
  std::chrono::milliseconds settle_limit{3000};
};

class SessionBridge {
 public:
  enum class Phase { joining, running, detached, barrier, settling, ended };
  enum class Fate { open, local_failure, remote_failure, self_stop };

  explicit SessionBridge(BridgeConfig c) : cfg_(std::move(c)) {}  // generation 0, being joined
  std::vector<Action> on(const Input& in);

  Phase phase() const { return phase_; }
  int generation() const { return generation_; }
  Fate fate(int generation) const;
  bool ended() const { return phase_ == Phase::ended; }

 private:
  std::vector<Action> on_state(const AgentState& in);
  std::vector<Action> on_local_failure(const LocalFailure& in);
  std::vector<Action> on_self_stop(const SelfStopped& in);
  std::vector<Action> on_job_event(const JobEvent& in);
  std::vector<Action> on_joined(const Joined& in);
  std::vector<Action> on_join_failed(const JoinFailed& in);
  std::vector<Action> on_agent_done(const AgentDone& in);
  std::vector<Action> on_barrier_done(const BarrierDone& in);
  std::vector<Action> on_settle_over();
  std::vector<Action> settled(const rdzv::Event& root);
  bool decide(int generation, Fate f);  // true when this decided the generation's fate

  BridgeConfig cfg_;
  Phase phase_ = Phase::joining;
  int generation_ = 0;          // the generation joined (or being joined)
  int fate_generation_ = -1;    // the last generation whose fate is decided
  Fate fate_ = Fate::open;      // ... and how
  std::optional<BarrierDone> remote_;  // the remote failure that decided it (a late failure's status)
  bool agent_done_ = false;     // the agent reached `done`: events no longer reach it
  std::vector<rdzv::Event> failures_;  // the worker failures of `generation_`, in the rendezvous's order
  std::string first_kind_;      // the kind of the generation's first job event ("failure", "lost", ...)
  int agent_code_ = 0;          // the agent's exit status, while settling
  bool restarted_ = false;      // the agent restarts after this generation's failure
};

// The root cause every node picks from the same failures in the same (the rendezvous's) order: the
// first whose worker failed by itself, not because its collectives saw a peer fail; nullopt when
// each of them only saw a peer fail (the peer's own report may still come).
std::optional<rdzv::Event> agreed_root(const std::vector<rdzv::Event>& failures);
// The peer whose failure a Report's message says its rank saw (-1: a peer not named), or nullopt.
std::optional<int> reported_peer_failure(const std::string& message);
// A root cause on another node as the summary shows it, from its failure event.
WorkerExit remote_exit(const rdzv::Event& e);

// The Agent event a session's job event causes (failure elsewhere, lost node, lost rendezvous, a
// node joining an elastic job); nullopt for events that are not fatal. `elastic`: a lost node
// restarts the job instead of ending it.
std::optional<Event> agent_event_for(const rdzv::Event& e, const std::string& endpoint, bool elastic = false);

// The outcome of the exit barrier: every node finished (nullopt), a failure elsewhere (the event),
// or the error NodeSession::finish() threw (NodeLostError 69, TimeoutError 75, else 125).
BarrierDone barrier_outcome(const std::optional<rdzv::Event>& cause, const std::string& endpoint);
BarrierDone barrier_failure(const std::exception& e);

// What a Report says of a failed worker: where it ran, whether its collectives saw a peer fail, and
// its own words (failure_report.hpp's evidence), bounded
// ("local rank 0, pid 812 (its collectives saw rank 3 fail); first exception on its stderr:\n    | ...").
std::string failure_message(const WorkerExit& w);
// What a ReportStop says: "interrupted (SIGINT)", or "stopped: <reason>".
std::string stop_message(const SelfStop& s);

// A failed re-join: Cancelled (the agent ended meanwhile) or the error's exit status and text.
JoinFailed join_failure(int generation, const std::exception& e);

}  // namespace dtrain::agent::bridge
