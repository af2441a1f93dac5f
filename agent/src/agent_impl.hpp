#pragma once
// Agent::Impl: the agent's orchestration. It owns the job machine (job_machine.hpp) and the
// collaborators its actions use, turns what happens on the loop into the machine's inputs, and
// carries out the actions the machine returns, in order:
//   EventLoop, Timer, SignalWatch  the loop, its timers (grace, backoff, max_runtime_s), the signals
//   Inbox                          events posted from other threads (Agent::post)
//   StartupContext                 what every worker is started with (command, workdir, env context)
//   RunFolder                      plan.json, logs, error files, progress pages, the checkpoint folder
//   Generation                     the current generation's workers (worker group, progress pages,
//                                  processes that left their groups, error files)
//   Terminal, OutputRouter         the workers' output and the agent's own lines
//   Guardian, Reaper               nothing outlives the agent; every child is reaped
//   EmbeddedStore                  the store a single-node job's workers use (embed_store)
//   ProgressWatch                  the ranks' progress pages while they run: published, and hangs
//   FailureNotice                  the first local failure on its way to the other nodes
// agent.cpp has the loop's callbacks, the machine's actions and the public Agent; agent_setup.cpp
// what runs before the loop (prepare) and after it (the teardown).
#include <atomic>
#include <chrono>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "dtrain/agent/agent.hpp"
#include "embedded_store.hpp"
#include "event_loop.hpp"
#include "failure_notice.hpp"
#include "generation.hpp"
#include "guardian.hpp"
#include "inbox.hpp"
#include "job_machine.hpp"
#include "output_router.hpp"
#include "progress_watch.hpp"
#include "reaper.hpp"
#include "run_folder.hpp"
#include "startup_context.hpp"
#include "terminal.hpp"
#include "worker_group.hpp"

namespace dtrain::agent {

struct Agent::Impl final : WorkerGroup::Listener {
  Impl(AgentOptions o, AgentHooks h);
  ~Impl();

  AgentOptions opt;
  AgentHooks hooks;
  AgentResult result;
  JobMachine machine;
  std::atomic<JobState> state{JobState::starting};  // the last state announced (Agent::state)
  std::chrono::steady_clock::time_point started;
  bool closing = false;  // the loop is being torn down: exits no longer reach the machine

  EventLoop loop;  // first: the handles below close into it
  Inbox inbox;
  SignalWatch signals;
  Timer grace, backoff, runtime;
  Terminal terminal;
  OutputRouter router;
  Guardian guardian;
  Reaper reaper;  // the workers (and, with reap_escapees, every child of the process)
  RunFolder run_folder;
  Generation gen;
  std::optional<StartupContext> context;  // from prepare() on
  std::vector<std::string> bindings_said;  // the CPU bindings last reported (said again when they change)
  EmbeddedStore store;
  ProgressWatch watch;
  FailureNotice notice;

  int run();

  // before the loop (agent_setup.cpp)
  void prepare();
  void start_guardian();
  bool command_runs();
  void open_loop();
  void adopt_plan(const config::Plan& plan);
  // after it: everything is killed, reaped, closed and removed (also the exception path)
  void close_loop();
  void close_control_handles();
  void release_guardian();

  // the state machine: feed an input, carry out its actions
  void apply(const job::Input& in);
  void check_drained();
  void explain_exit(WorkerExit& w);
  void execute(const job::Enter& a);
  void execute(const job::Spawn& a);
  void report_bindings(const CpuBinding& b);
  void execute(const job::Kill& a);
  void execute(const job::Say& a) { terminal.say(a.text); }
  void execute(const job::LocalFailure& a);
  void execute(const job::SelfStopped& a) {
    if (hooks.on_self_stop) hooks.on_self_stop(a.stop, machine.generation());
  }
  void execute(const job::Progress&) { terminal.update_progress(); }
  void execute(const job::CancelBackoff&) { backoff.stop(); }
  void execute(const job::ArmBackoff&) { backoff.start(opt.plan.spec.restart.backoff_s); }
  void execute(const job::Collect& a);
  void execute(const job::Finish& a);
  void hung(const ProgressWatch::Hang& hang);
  void record_stacks();
  void fatal(const std::exception& e);

  // WorkerGroup::Listener
  void worker_exited(const WorkerExit& exit) override;
  void output_closed() override;
  void callback_failed(const std::exception& e) noexcept override { fatal(e); }
};

}  // namespace dtrain::agent
