#pragma once
// The job's fate as a pure state machine: (state, input) -> (state, actions). It holds the restart
// policy (the budget, what may restart, which stop cause wins, when a second signal escalates) and
// the root cause; it knows no libuv, no processes and no clock. The agent (agent.cpp) feeds it what
// happened and carries out the returned actions in order; tests/agent/test_job_machine.cpp drives
// it table by table.
//
//   starting --spawned--> running --failure/signal/event--> stopping --drained--> done
//       ^  (waits for go                                        |
//       |   when external_start)                                +--drained, budget left--> restarting
//       +------------------------------backoff_over-------------------------------------------+
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "dtrain/agent/events.hpp"
#include "dtrain/agent/job_state.hpp"
#include "dtrain/agent/worker_exit.hpp"
#include "dtrain/common/exit_codes.hpp"

namespace dtrain::agent {

// Why the current generation is being stopped. The first cause usually wins; node_lost, abort and
// timeout override a failure, a restart order overrides a failure but not an interrupt.
enum class StopReason { none, failure, signal, timeout, hang, peer_failed, peer_restart, abort };

// The launch's own part of the policy; the job's settings (restart.max_restarts, grace_s,
// max_runtime_s) are read from the plan's spec, the one place they live.
struct JobPolicy {
  bool external_start = false;          // every generation waits for Event::go
  std::optional<int> master_port{};       // MASTER_PORT of every generation; unset: a free one each
  int first_generation = 0;
};

// What happened (inputs). `live` is the number of local workers still running.
namespace job {
struct Start {};                                  // run() begins: start generation 0
struct Spawned {};                                // every local worker of the generation started
struct SpawnFailed { std::string what; int code = exit_code::internal; };  // a worker could not be started (code: exit status)
struct WorkerExited { WorkerExit exit; };         // one worker ended (reaped)
struct Drained { std::vector<WorkerExit> exits; };  // every worker ended and its output is read
struct GraceOver { int live = 0; };               // the grace period after SIGTERM passed
struct BackoffOver {};                            // the pause before the next generation passed
struct RuntimeOver {};                            // max_runtime_s passed
struct Signal { int sig = 0; int live = 0; };     // a signal to the agent
struct Remote { Event event; };                   // an event from the other nodes (Agent::post)
struct Fatal { std::string what; };               // the agent itself failed (exception)
struct Hung {                                     // no progress (output.hang_timeout_s, a stopped rank)
  std::string what;
  std::optional<WorkerExit> culprit{};            // the local rank the job hangs on (exit_code 70), if any
};
using Input = std::variant<Start, Spawned, SpawnFailed, WorkerExited, Drained, GraceOver, BackoffOver,
                           RuntimeOver, Signal, Remote, Fatal, Hung>;

// What to do (outputs), in order.
struct Enter { JobState state; };                // announce the new state (hooks, progress line)
struct Spawn {                                   // start every local worker, then feed Spawned or
  int generation = 0;                            // SpawnFailed; master_port unset: pick a free port
  std::optional<int> master_port;
};
struct Kill { int sig = 0; bool stopping = false; std::optional<double> grace_s{}; };  // signal every
    // live worker's group; stopping: they are being stopped by the agent; grace_s: SIGKILL after it
struct Say { std::string text; };                // one line on the agent's stderr
struct LocalFailure { WorkerExit exit; };        // the first local failure of the generation
struct SelfStopped { SelfStop stop; };           // this node stops on its own (before Enter stopping)
struct Progress {};                              // refresh the progress line
struct CancelBackoff {};
struct ArmBackoff {};                            // feed BackoffOver after the backoff pause
struct Collect {                                 // the generation is over: retire its workers
  std::optional<WorkerExit> root_cause;
  std::vector<WorkerExit> other_failures;
};
struct Finish { int exit_code = 0; std::optional<std::string> reason; };  // the job is over
using Action = std::variant<Enter, Spawn, Kill, Say, LocalFailure, SelfStopped, Progress, CancelBackoff, ArmBackoff,
                            Collect, Finish>;
}  // namespace job

class JobMachine {
 public:
  // `job` (the plan's spec) must outlive the machine.
  JobMachine(const config::JobSpec& job, JobPolicy policy)
      : job_(job), policy_(std::move(policy)), generation_(policy_.first_generation),
        master_port_(policy_.master_port) {}

  std::vector<job::Action> on(const job::Input& input);

  JobState state() const { return state_; }
  int generation() const { return generation_; }
  int restarts() const { return restarts_; }
  StopReason stop_reason() const { return stop_.reason; }
  const std::optional<WorkerExit>& root_cause() const { return root_; }
  // external_start and the go of this generation has not come yet
  bool waiting_for_go() const { return policy_.external_start && go_generation_ < generation_; }
  // running or stopping: a Drained input ends the generation
  bool collecting() const { return state_ == JobState::running || state_ == JobState::stopping; }
  const JobPolicy& policy() const { return policy_; }

 private:
  struct StopCause {
    StopReason reason = StopReason::none;
    int signal = 0;    // signal: the signal the agent got
    int code = 0;      // abort, peer_failed: the exit status to end with
    std::string text;  // why, for messages and AgentResult::reason
  };
  using Actions = std::vector<job::Action>;

  void enter(JobState s, Actions& out);
  void start_generation(Actions& out);
  void spawn(Actions& out);
  void begin_stop(int sig, Actions& out);
  void on_spawn_failed(const job::SpawnFailed& in, Actions& out);
  void on_exit(const job::WorkerExited& in, Actions& out);
  void on_drained(const job::Drained& in, Actions& out);
  void decide(Actions& out);
  void on_grace(const job::GraceOver& in, Actions& out);
  void on_backoff(Actions& out);
  void on_runtime(Actions& out);
  void on_signal(const job::Signal& in, Actions& out);
  void on_remote(const Event& e, Actions& out);
  void on_fatal(const job::Fatal& in, Actions& out);
  void on_hung(const job::Hung& in, Actions& out);
  bool idle() const { return state_ == JobState::starting || state_ == JobState::restarting; }

  const config::JobSpec& job_;
  JobPolicy policy_;
  JobState state_ = JobState::starting;
  int generation_ = 0;
  int go_generation_ = -1;
  std::optional<int> next_generation_;  // set by a restart order from the other nodes
  std::optional<int> master_port_;      // the policy's, then the last go's
  int restarts_ = 0;
  StopCause stop_;
  bool self_inflicted(const WorkerExit& w) const;

  bool escalated_ = false;              // a second signal already sent SIGKILL
  bool sent_kill_ = false;              // SIGKILL went to the workers this generation
  bool reported_ = false;               // a local failure of this generation went out (LocalFailure)
  // first local failure of the generation; once drained, the failure of a local peer it only saw
  // fail (its peer_failure), when that peer failed by itself
  std::optional<WorkerExit> root_;
};

}  // namespace dtrain::agent
