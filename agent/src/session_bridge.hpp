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
//   any        --AgentDone(!=0)--> ended
// The fate of a generation is decided once, by whichever comes first: a local worker failure (it is
// reported; the others follow), a failure or loss elsewhere (posted to the agent), or this node
// stopping on its own (a signal, max_runtime_s: its exit status stands, and a loss seen afterwards is
// a consequence of it). A remote failure that the agent did not act on before it ended with 0 is a
// late failure: the node exits with that status instead of entering the exit barrier. In the barrier,
// NodeSession::finish() itself watches for failures and losses.
//
// Extension points (designed for, not implemented):
//  (a) Ctrl-C/SIGTERM reported to the others as "node 1 interrupted (SIGINT)" with 130/143 instead of
//      a lost host: when AgentState(stopping) decides Fate::self_stop because of a signal, also emit a
//      Report (a new event kind on the wire, with the signal) before the agent ends; agent_event_for()
//      maps it to Event::Kind::abort with 128+signal. Needs the stop reason from the Agent (on_state
//      carries only the state today; an AgentHooks addition, e.g. on_self_stop(signal, reason)).
//  (b) the remote root cause with the failing rank's stderr tail: LocalFailure carries the WorkerExit
//      and Report::message is where its last_stderr goes (the Agent fills last_stderr only when the
//      generation ends, so it must hand the tail over at on_local_failure time).
//  (c) a spec/shape mismatch naming the fields, every node exiting at once: node_config's spec_hash()
//      becomes a field digest; a mismatch found by the server arrives here as a JobEvent that
//      agent_event_for() maps to an abort with exit status 2 (like rank -1 failures today).
//  (d) elastic membership: a JobEvent "membership" (a node joined or left) posts Event::Kind::restart
//      for g+1; the AgentState(starting) -> Rejoin -> Joined path already re-runs the join barrier per
//      generation, and Joined would carry the new rank table (apply it instead of check_same_ranks).
#include <chrono>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "dtrain/agent/agent.hpp"
#include "dtrain/rendezvous/records.hpp"

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
struct JobEvent {  // NodeSession's on_event, from the monitoring of `generation`
  rdzv::Event event;
  int generation;
};
struct Joined {  // a (re-)join of `generation` succeeded
  int generation;
  int master_port;
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
using Input = std::variant<AgentState, LocalFailure, JobEvent, Joined, JoinFailed, AgentDone, BarrierDone>;

// ---- actions -------------------------------------------------------------------------------------
struct StartMonitoring {  // heartbeats and job events of `generation`
  int generation;
};
struct Post {  // Agent::post
  Event event;
};
struct Publish {  // NodeSession::set_local_state
  std::string state;
  int running;
  int generation;
};
struct Report {  // NodeSession::report_failure; rank -1: the agent itself failed
  int rank;
  int exit_code;
  int signal;
  std::string message;
};
struct Rejoin {  // NodeSession::rejoin; answers with Joined or JoinFailed
  int generation;
};
struct ExitBarrier {  // NodeSession::finish; answers with BarrierDone
  std::chrono::milliseconds limit;
};
struct End {  // this node's exit status; `message` (when not empty) goes to stderr as "dtrain: ..."
  int exit_code;
  std::string message;
};
using Action = std::variant<StartMonitoring, Post, Publish, Report, Rejoin, ExitBarrier, End>;

struct BridgeConfig {
  int node_rank = 0;        // this node's rank (from the first join)
  int slots = 1;            // local workers (published as running)
  std::string endpoint;     // the rendezvous, for messages
  std::chrono::milliseconds barrier_limit{0};
};

class SessionBridge {
 public:
  enum class Phase { joining, running, detached, barrier, ended };
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
  std::vector<Action> on_job_event(const JobEvent& in);
  std::vector<Action> on_joined(const Joined& in);
  std::vector<Action> on_join_failed(const JoinFailed& in);
  std::vector<Action> on_agent_done(const AgentDone& in);
  std::vector<Action> on_barrier_done(const BarrierDone& in);
  bool decide(int generation, Fate f);  // true when this decided the generation's fate

  BridgeConfig cfg_;
  Phase phase_ = Phase::joining;
  int generation_ = 0;          // the generation joined (or being joined)
  int fate_generation_ = -1;    // the last generation whose fate is decided
  Fate fate_ = Fate::open;      // ... and how
  std::optional<BarrierDone> remote_;  // the remote failure that decided it (a late failure's status)
  bool agent_done_ = false;     // the agent reached `done`: events no longer reach it
};

// The Agent event a session's job event causes (failure elsewhere, lost node, lost rendezvous);
// nullopt for events that are not fatal.
std::optional<Event> agent_event_for(const rdzv::Event& e, const std::string& endpoint);

// The outcome of the exit barrier: every node finished (nullopt), a failure elsewhere (the event),
// or the error NodeSession::finish() threw (NodeLostError 69, TimeoutError 75, else 125).
BarrierDone barrier_outcome(const std::optional<rdzv::Event>& cause, const std::string& endpoint);
BarrierDone barrier_failure(const std::exception& e);

// A failed re-join: Cancelled (the agent ended meanwhile) or the error's exit status and text.
JoinFailed join_failure(int generation, const std::exception& e);

}  // namespace dtrain::agent::bridge
