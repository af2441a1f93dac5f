// The agent's orchestration: one libuv loop that turns what happens (worker exits, output ends,
// signals, timers, events from other nodes) into inputs of the job state machine (job_machine.hpp)
// and carries out the actions it returns with the worker group, the guardian, the terminal and the
// run folder.
#include "agent_impl.hpp"

#include <uv.h>

#include <csignal>
#include <cstring>

#include "dtrain/agent/hang.hpp"
#include "dtrain/common/errors.hpp"
#include "dtrain/common/log.hpp"
#include "dtrain/common/net.hpp"
#include "failure_report.hpp"
#include "shim.h"

namespace dtrain::agent {

// The loop and the guardian, first of all: the guardian's start (two forks and an exec, none of
// which the agent waits for) overlaps with the rest of the set-up.
void Agent::Impl::start_guardian() {
  int rc = uv_loop_init(&loop);
  if (rc < 0) throw_os_error(rc, "cannot create the agent's event loop");
  loop_inited = true;
  reaper.start(&loop, opt.reap_escapees);
  guardian.start(&loop, setup.guardian_program.exe, setup.guardian_program.guard_word, opt.output.stderr_fd, setup.ctx.agent_id,
                 [this](const std::string& message) { fatal(IoError(message)); });
  guardian.sweep_at_end(setup.ctx.shm_prefix);
}

void Agent::Impl::open_loop() {
  gen.group().open(&loop, {setup.command, setup.workdir.string()});
  watch_signals();
  int rc = 0;
  for (auto* t : {&timers.grace, &timers.backoff, &timers.runtime, &timers.progress, &timers.failure}) {
    rc = t->init([&](uv_timer_t* h) { return uv_timer_init(&loop, h); }, this);
    if (rc < 0) throw IoError(fmt::format("uv_timer_init: {}", uv_strerror(rc)));
  }
  std::unique_lock async_lock(inbox.mu);  // post() reads `inbox.async` from other threads
  rc = inbox.async.init([&](uv_async_t* a) {
    return uv_async_init(&loop, a, [](uv_async_t* h) noexcept {
      auto* self = static_cast<Impl*>(h->data);
      if (self == nullptr) return;
      std::vector<Event> evs;
      {
        std::lock_guard lk(self->inbox.mu);
        evs.swap(self->inbox.events);
      }
      for (const auto& e : evs)
        guarded(*self, [&] {
          if (e.kind == Event::Kind::go && e.plan) self->adopt_plan(*e.plan);
          self->apply(job::Remote{e});
        });
    });
  }, this);
  if (rc < 0) throw IoError(fmt::format("uv_async_init: {}", uv_strerror(rc)));
  if (!inbox.events.empty()) uv_async_send(inbox.async.get());
}

void Agent::Impl::watch_signals() {
  const int sigs[5] = {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2};
  for (int i = 0; i < 5; ++i) {
    int rc = signals[i].init([&](uv_signal_t* s) { return uv_signal_init(&loop, s); }, this);
    if (rc < 0) throw IoError(fmt::format("uv_signal_init: {}", uv_strerror(rc)));
    uv_signal_start(signals[i].get(), [](uv_signal_t* s, int sig) noexcept {
      auto* self = static_cast<Impl*>(s->data);
      if (self != nullptr) guarded(*self, [&] { self->apply(job::Signal{sig, self->gen.group().live()}); });
    }, sigs[i]);
  }
  std::signal(SIGPIPE, SIG_IGN);
}

void Agent::Impl::arm_runtime() {
  const auto& max_runtime_s = opt.plan.spec.max_runtime_s;
  if (!max_runtime_s || *max_runtime_s <= 0) return;
  uv_timer_start(timers.runtime.get(), [](uv_timer_t* t) noexcept {
    auto* self = static_cast<Impl*>(t->data);
    if (self != nullptr) guarded(*self, [&] { self->apply(job::RuntimeOver{}); });
  }, to_ms(*max_runtime_s), 0);
}

// Once a second: the workers' progress pages; a wait longer than hang_timeout_s is a hang.
void Agent::Impl::arm_progress() {
  if ((!opt.plan.spec.output.hang_timeout_s && !hooks.on_progress) || gen.board().empty()) return;
  uv_timer_start(timers.progress.get(), [](uv_timer_t* t) noexcept {
    auto* self = static_cast<Impl*>(t->data);
    if (self != nullptr) guarded(*self, [&] { self->check_progress(); });
  }, 1000, 1000);
}

void Agent::Impl::check_progress() {
  if (machine.state() != JobState::running) return;
  const auto& hang_timeout_s = opt.plan.spec.output.hang_timeout_s;
  auto pages = gen.board().snapshot();
  Diagnosis d = diagnose(pages, progress::now_ns(), hang_timeout_s.value_or(kStuckAfterS));
  // published whether or not a rank uses dtrain's collectives: the unseen ones are named as such
  if (hooks.on_progress) hooks.on_progress(diagnosis_text(d));
  if (!d.hung || !hang_timeout_s) return;
  result.hang = d.lines;
  apply(job::Hung{fmt::format("hang: {} (output.hang_timeout_s {})", d.verdict, *hang_timeout_s)});
}

int Agent::Impl::run() {
  prepare();
  if (!command_runs()) return result.exit_code;
  if (opt.embed_store && opt.store_addr.empty()) start_store();
  open_loop();
  arm_runtime();
  arm_progress();
  apply(job::Start{});
  uv_run(&loop, UV_RUN_DEFAULT);
  return result.exit_code;
}

// The event async, signal watchers, timers and the guardian's stdin: everything but the workers.
void Agent::Impl::close_control_handles() {
  {
    std::lock_guard lk(inbox.mu);
    inbox.closed = true;
    inbox.async.close();
  }
  for (auto& s : signals) s.close();
  for (auto* t : {&timers.grace, &timers.backoff, &timers.runtime, &timers.progress, &timers.failure}) t->close();
  store_watch.close();
  gen.group().close_timer();
  release_guardian();
}

// The guardian's stdin closes, so it ends. When nothing of the job can be left (no worker alive,
// none started or every process that left a worker's group gone, the segments swept, the temporary
// folders removed), it hears so first and ends at once instead of searching /proc, and nothing
// waits for it: it has nothing left to do (otherwise the loop runs until it has done its work).
void Agent::Impl::release_guardian() {
  bool clear = gen.all_gone();
  if (clear) {
    gen.sweep_segments(setup.ctx.shm_prefix);
    run_folder.remove();
    guardian.all_clear();
  }
  guardian.release();
  if (clear) guardian.forsake();
}

void Agent::Impl::close_loop() {
  // also the exception path: nothing may survive us
  closing = true;
  guardian.settle();
  gen.group().kill_now();
  gen.kill_escapees(2000);
  close_control_handles();
  state = JobState::done;
  uv_run(&loop, UV_RUN_DEFAULT);  // reaps the workers, sees the guardian end, runs close callbacks
  gen.group().close();
  guardian.close();
  reaper.close();
  uv_run(&loop, UV_RUN_DEFAULT);
  int rc = uv_loop_close(&loop);
  if (rc != 0) DTRAIN_WARN(agent, "libuv loop closed with handles left: {}", uv_strerror(rc));
}

// ---- the state machine's actions ------------------------------------------------------------

void Agent::Impl::apply(const job::Input& in) {
  auto actions = machine.on(in);
  result.restarts = machine.restarts();
  for (const auto& a : actions) std::visit([&](const auto& x) { execute(x); }, a);
  check_drained();
}

// Every worker of a running or stopping generation ended and its output is read: it is over.
void Agent::Impl::check_drained() {
  if (!machine.collecting() || !gen.group().finished()) return;
  auto exits = gen.group().exits();
  for (auto& w : exits) explain_exit(w);
  apply(job::Drained{std::move(exits)});
}

// What a failed worker said of its failure: its error file, its first exception, a peer's failure
// its collectives saw, a hint.
void Agent::Impl::explain_exit(WorkerExit& w) {
  if (w.status() == 0) return;
  w.error_file = gen.error_file(w.rank);
  if (!setup.interpreter) {
    auto path = setup.base_env.find("PATH");
    std::string path_var = opt.plan.spec.env.count("PATH") ? opt.plan.spec.env.at("PATH")
                           : path != setup.base_env.end()  ? path->second
                                                           : "/usr/local/bin:/usr/bin:/bin";
    setup.interpreter = python_interpreter(setup.command, path_var, setup.workdir);
  }
  explain(w, *setup.interpreter);
}

void Agent::Impl::execute(const job::Enter& a) {
  if (a.state == JobState::starting) gen.group().clear_retired();
  state = a.state;
  if (hooks.on_state) hooks.on_state(a.state, machine.generation());
  terminal.update_progress();
}

void Agent::Impl::execute(const job::Spawn& a) {
  gen.begin();
  auto& ctx = setup.ctx;
  ctx.generation = a.generation;
  ctx.master_port = a.master_port ? *a.master_port : net::pick_free_port("0.0.0.0");
  auto logs = run_folder.attempt(a.generation);
  if (logs) result.logs = logs->string();
  for (const auto& r : opt.plan.ranks) {
    if (r.node_rank != opt.plan.identity.node_rank) continue;
    try {
      gen.spawn(r, worker_env(opt.plan, r, ctx, setup.base_env), run_folder.attempt_path(a.generation), logs,
                opt.reap_escapees);
    } catch (const std::exception& e) {
      return apply(job::SpawnFailed{e.what(), exit_status_of(e)});
    }
  }
  apply(job::Spawned{});  // a job of zero local workers is over at once
}

void Agent::Impl::execute(const job::Kill& a) {
  gen.group().kill(a.sig, a.stopping);
  if (!a.grace_s || gen.group().live() == 0) return;
  uv_timer_start(timers.grace.get(), [](uv_timer_t* t) noexcept {
    auto* self = static_cast<Impl*>(t->data);
    if (self != nullptr) guarded(*self, [&] { self->apply(job::GraceOver{self->gen.group().live()}); });
  }, to_ms(*a.grace_s), 0);
}

void Agent::Impl::execute(const job::LocalFailure& a) {
  if (a.exit.exec_errno != 0)
    terminal.say(fmt::format("dtrain: rank {}: cannot {} '{}': {}", a.exit.rank,
                             a.exit.workdir_error ? "enter the workdir" : "execute",
                             a.exit.workdir_error ? setup.workdir.string() : setup.command[0], std::strerror(a.exit.exec_errno)));
  gen.hold_failure(a.exit, machine.generation());
  flush_failure(false);
  if (!gen.failure_held()) return;
  // a process that left the worker's group may hold its stderr: the others hear of it soon anyway
  uv_timer_start(timers.failure.get(), [](uv_timer_t* t) noexcept {
    auto* self = static_cast<Impl*>(t->data);
    if (self != nullptr) guarded(*self, [&] { self->flush_failure(true); });
  }, kTailWaitMs, 0);
}

// The hooks hear of the failure with the last lines of its stderr: once that worker's output is
// read (or, `force`, when the generation ends and a process that escaped still holds its pipe).
void Agent::Impl::flush_failure(bool force) {
  if (!hooks.on_local_failure) return gen.drop_failure();
  auto failure = gen.take_failure(force);
  if (!failure) return;
  auto& [w, g] = *failure;
  explain_exit(w);
  hooks.on_local_failure(w, g);
}

void Agent::Impl::execute(const job::ArmBackoff&) {
  uv_timer_start(timers.backoff.get(), [](uv_timer_t* t) noexcept {
    auto* self = static_cast<Impl*>(t->data);
    if (self != nullptr) guarded(*self, [&] { self->apply(job::BackoffOver{}); });
  }, to_ms(opt.plan.spec.restart.backoff_s), 0);
}

void Agent::Impl::execute(const job::Collect& a) {
  flush_failure(true);
  uv_timer_stop(timers.grace.get());
  gen.end(setup.ctx.shm_prefix);
  terminal.flush();
  result.root_cause = a.root_cause;
  result.other_failures = a.other_failures;
}

void Agent::Impl::execute(const job::Finish& a) {
  if (a.reason) result.reason = *a.reason;
  result.exit_code = a.exit_code;
  result.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  execute(job::Enter{JobState::done});
  terminal.clear_progress();
  gen.sweep_segments(setup.ctx.shm_prefix);
  close_control_handles();   // the guardian's stdin reaches EOF: it exits (its list is empty by now)
  if (store) store->stop();  // every worker is gone; overlaps with the guardian's exit
  // a multi-node job reports once the nodes agree on the root cause, after its exit barrier (multinode.cpp)
  if (!opt.external_start) write_summary(result, opt.output.stderr_fd, opt.summary_json);
}

void Agent::Impl::fatal(const std::exception& e) {
  DTRAIN_ERROR(agent, "{}", e.what());
  if (closing) return;
  try {
    apply(job::Fatal{e.what()});
  } catch (...) {
    gen.group().kill(SIGKILL);
  }
}

void Agent::Impl::worker_exited(const WorkerExit& exit) {
  if (!closing) apply(job::WorkerExited{exit});
}

void Agent::Impl::output_closed() {
  if (closing) return;
  flush_failure(false);
  terminal.flush();
  check_drained();
}

// ---- Agent ----------------------------------------------------------------------------------

Agent::Agent(AgentOptions options, AgentHooks hooks)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(hooks))) {}
Agent::~Agent() = default;

int Agent::run() { return impl_->run(); }
const AgentResult& Agent::result() const { return impl_->result; }
JobState Agent::state() const { return impl_->state.load(); }

void Agent::post(Event e) {
  auto& inbox = impl_->inbox;
  std::lock_guard lk(inbox.mu);
  if (inbox.closed) return;
  inbox.events.push_back(std::move(e));
  if (inbox.async) uv_async_send(inbox.async.get());
}

int guardian_main(int, char**) { return dtrain_shim_guard(); }

}  // namespace dtrain::agent
