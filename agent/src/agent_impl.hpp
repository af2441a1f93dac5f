#pragma once
// Agent::Impl, the agent's one libuv loop and what it owns, shared by the files that implement it:
// agent.cpp (the loop, the job machine's actions, the public Agent) and agent_setup.cpp (what runs
// before the loop: the command, the run folder, the env context, the standalone store, and an
// elastic generation's plan). The current generation's workers: generation.hpp.
#include "dtrain/agent/agent.hpp"

#include <uv.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dtrain/agent/env.hpp"
#include "dtrain/common/uv_handle.hpp"
#include "dtrain/rendezvous/server/server.hpp"
#include "generation.hpp"
#include "guardian.hpp"
#include "job_machine.hpp"
#include "output_router.hpp"
#include "reaper.hpp"
#include "resolve_command.hpp"
#include "run_folder.hpp"
#include "terminal.hpp"
#include "worker_group.hpp"

namespace dtrain::agent {

namespace fs = std::filesystem;

// How long a local failure waits for the rest of its stderr before the other nodes hear of it.
inline constexpr std::uint64_t kTailWaitMs = 500;

inline std::uint64_t to_ms(double s) { return s <= 0 ? 0 : static_cast<std::uint64_t>(s * 1000.0 + 0.5); }

inline JobPolicy policy_of(const AgentOptions& o) {
  JobPolicy p;
  p.external_start = o.external_start;
  p.master_port = o.master_port ? o.master_port : o.plan.identity.master_port;
  p.first_generation = o.first_generation;
  return p;
}

// What the workers are started with: set before the loop runs (prepare, start_store); each spawn
// sets the context's generation and MASTER_PORT, an elastic generation's plan its master address.
struct WorkerSetup {
  EnvMap base_env;                         // the agent's own environment
  EnvContext ctx;                          // run id, store, master address, generation, port
  fs::path workdir;
  std::vector<std::string> command;        // spec.command, then extra_args
  GuardianProgram guardian_program;
  std::optional<std::string> interpreter;  // the Python that runs the command ("" : none), once looked up
  int local_total = 0;                     // workers on this node
};

// Events posted from other threads (Agent::post), handed to the loop by an async.
struct Inbox {
  std::mutex mu;
  std::vector<Event> events;
  bool closed = false;
  UvHandle<uv_async_t> async;
};

// SIGTERM -> SIGKILL grace, restart backoff, max_runtime_s, the progress tick (hang diagnosis), and a
// local failure's wait for its stderr (kTailWaitMs).
struct Timers {
  UvHandle<uv_timer_t> grace, backoff, runtime, progress, failure;
};

// The agent: its loop, the job machine it drives, and the collaborators the machine's actions use.
// What starts afresh with each generation lives in `gen` (generation.hpp).
struct Agent::Impl final : WorkerGroup::Listener {
  AgentOptions opt;
  AgentHooks hooks;
  AgentResult result;
  JobMachine machine;
  std::atomic<JobState> state{JobState::starting};  // the last state announced (Agent::state)
  std::unique_ptr<rdzv::Server> store;               // the embedded standalone store (embed_store)
  UvHandle<uv_poll_t> store_watch;  // the embedded store's socket until its first connection

  uv_loop_t loop{};
  bool loop_inited = false;
  bool closing = false;  // the loop is being torn down: exits no longer reach the machine
  Inbox inbox;
  UvHandle<uv_signal_t> signals[5];
  Timers timers;

  Terminal terminal;
  OutputRouter router;
  Guardian guardian;
  Reaper reaper;  // the workers (and, with reap_escapees, every child of the process)
  RunFolder run_folder;
  Generation gen;
  WorkerSetup setup;
  std::chrono::steady_clock::time_point started;

  Impl(AgentOptions o, AgentHooks h)
      : opt(std::move(o)),
        hooks(std::move(h)),
        machine(opt.plan.spec, policy_of(opt)),
        terminal(opt.output.stdout_fd, opt.output.stderr_fd, opt.progress),
        router(opt.plan.spec.output, opt.output, terminal),
        gen(router, guardian, reaper, *this) {
    terminal.set_progress_source([this] {
      return progress_text({state.load(), result.restarts, opt.plan.spec.restart.max_restarts,
                            gen.group().live(), setup.local_total, machine.waiting_for_go()});
    });
  }
  ~Impl();

  int run();
  void prepare();
  std::vector<int> local_ranks() const;
  void adopt_plan(const config::Plan& plan);
  bool command_runs();
  void start_store();
  void start_guardian();
  void open_loop();
  void watch_signals();
  void arm_runtime();
  void arm_progress();
  void check_progress();
  void flush_failure(bool force);
  void close_loop();
  void close_control_handles();
  void release_guardian();

  // the state machine: feed an input, carry out its actions
  void apply(const job::Input& in);
  void check_drained();
  void explain_exit(WorkerExit& w);
  void execute(const job::Enter& a);
  void execute(const job::Spawn& a);
  void execute(const job::Kill& a);
  void execute(const job::Say& a) { terminal.say(a.text); }
  void execute(const job::LocalFailure& a);
  void execute(const job::SelfStopped& a) {
    if (hooks.on_self_stop) hooks.on_self_stop(a.stop, machine.generation());
  }
  void execute(const job::Progress&) { terminal.update_progress(); }
  void execute(const job::CancelBackoff&) { uv_timer_stop(timers.backoff.get()); }
  void execute(const job::ArmBackoff&);
  void execute(const job::Collect& a);
  void execute(const job::Finish& a);
  void fatal(const std::exception& e);

  // WorkerGroup::Listener
  void worker_exited(const WorkerExit& exit) override;
  void output_closed() override;
  void callback_failed(const std::exception& e) noexcept override { fatal(e); }
};

}  // namespace dtrain::agent
