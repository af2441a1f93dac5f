// The agent's orchestration: one libuv loop that turns what happens (worker exits, output ends,
// signals, timers, events from other nodes) into inputs of the job state machine (job_machine.hpp)
// and carries out the actions it returns with the worker group, the guardian, the terminal and the
// run folder.
#include "dtrain/agent/agent.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <utility>

#include "dtrain/agent/env.hpp"
#include "dtrain/agent/hang.hpp"
#include "dtrain/agent/output.hpp"
#include "dtrain/common/errors.hpp"
#include "dtrain/common/exit_codes.hpp"
#include "dtrain/common/log.hpp"
#include "dtrain/common/net.hpp"
#include "dtrain/common/shm_names.hpp"
#include "dtrain/common/system.hpp"
#include "dtrain/common/uv_handle.hpp"
#include "dtrain/rendezvous/auth.hpp"
#include "dtrain/rendezvous/node_session.hpp"
#include "dtrain/rendezvous/server.hpp"
#include "escapees.hpp"
#include "guardian.hpp"
#include "job_machine.hpp"
#include "output_router.hpp"
#include "progress_board.hpp"
#include "resolve_command.hpp"
#include "run_folder.hpp"
#include "shim.h"
#include "terminal.hpp"
#include "worker_group.hpp"

namespace dtrain::agent {

namespace fs = std::filesystem;

namespace {

// How long a local failure waits for the rest of its stderr before the other nodes hear of it.
constexpr std::uint64_t kTailWaitMs = 500;

std::uint64_t to_ms(double s) { return s <= 0 ? 0 : static_cast<std::uint64_t>(s * 1000.0 + 0.5); }

JobPolicy policy_of(const AgentOptions& o) {
  JobPolicy p;
  p.max_restarts = o.max_restarts;
  p.external_start = o.external_start;
  p.grace_s = o.grace_s;
  p.max_runtime_s = o.max_runtime_s;
  p.master_port = o.master_port;
  p.first_generation = o.first_generation;
  return p;
}

}  // namespace

struct Agent::Impl final : WorkerGroup::Listener {
  AgentOptions opt;
  AgentHooks hooks;
  AgentResult result;
  JobMachine machine;
  std::atomic<JobState> state{JobState::starting};  // the last state announced (Agent::state)
  std::unique_ptr<rdzv::Server> store;               // the embedded standalone store (embed_store)

  uv_loop_t loop{};
  bool loop_inited = false;
  bool closing = false;  // the loop is being torn down: exits no longer reach the machine

  std::mutex events_mu;
  std::vector<Event> events;
  bool events_closed = false;
  UvHandle<uv_async_t> async;
  UvHandle<uv_signal_t> signals[5];
  UvHandle<uv_timer_t> grace_timer, backoff_timer, runtime_timer, progress_timer, failure_timer;

  Terminal terminal;
  OutputRouter router;
  Guardian guardian;
  WorkerGroup group;
  Escapees escapees;
  RunFolder run_folder;
  ProgressBoard board;  // the workers' progress pages (hang diagnosis)
  std::chrono::steady_clock::time_point started;
  // the first local failure of the generation, told to the hooks once its stderr is read
  std::optional<std::pair<WorkerExit, int>> pending_failure;

  EnvMap base_env;
  EnvContext ctx;
  fs::path workdir;
  std::vector<std::string> command;
  Helper helper;  // what starts the workers and the guardian
  int local_total = 0;

  Impl(AgentOptions o, AgentHooks h)
      : opt(std::move(o)),
        hooks(std::move(h)),
        machine(policy_of(opt)),
        terminal(opt.output.stdout_fd, opt.output.stderr_fd, opt.progress),
        router(opt.output, terminal),
        group(router, guardian, *this) {
    terminal.set_progress_source([this] {
      return progress_text({state.load(), result.restarts, opt.max_restarts, group.live(), local_total,
                            machine.waiting_for_go()});
    });
  }
  ~Impl();

  int run();
  void prepare();
  std::vector<int> local_ranks() const;
  void adopt_plan(const config::Plan& plan);
  bool command_runs();
  void start_store();
  void open_loop();
  void watch_signals();
  void arm_runtime();
  void arm_progress();
  void check_progress();
  void flush_failure(bool force);
  void close_loop();
  void close_control_handles();

  // the state machine: feed an input, carry out its actions
  void apply(const job::Input& in);
  void check_drained();
  void execute(const job::Enter& a);
  void execute(const job::Spawn& a);
  void execute(const job::Kill& a);
  void execute(const job::Say& a) { terminal.say(a.text); }
  void execute(const job::LocalFailure& a);
  void execute(const job::SelfStopped& a) {
    if (hooks.on_self_stop) hooks.on_self_stop(a.stop, machine.generation());
  }
  void execute(const job::Progress&) { terminal.update_progress(); }
  void execute(const job::CancelBackoff&) { uv_timer_stop(backoff_timer.get()); }
  void execute(const job::ArmBackoff&);
  void execute(const job::Collect& a);
  // Removes the shared-memory segments the workers left (a worker killed during setup leaves one).
  void sweep_segments() {
    if (std::size_t n = shm_names::sweep(ctx.shm_prefix))
      DTRAIN_DEBUG(agent, "removed {} shared-memory segment(s) {}* the workers left", n, ctx.shm_prefix);
  }
  void execute(const job::Finish& a);
  void fatal(const std::exception& e);

  // WorkerGroup::Listener
  void worker_exited(const WorkerExit& exit) override;
  void output_closed() override;
  void callback_failed(const std::exception& e) noexcept override { fatal(e); }
};

// ---- setup ----------------------------------------------------------------------------------

Agent::Impl::~Impl() {
  if (loop_inited) close_loop();
  if (store) store->stop();
  sweep_segments();
  remove_local_run(::getpid());
}

void Agent::Impl::prepare() {
  started = std::chrono::steady_clock::now();
  const auto& spec = opt.plan.spec;
  command = spec.command;
  command.insert(command.end(), opt.extra_args.begin(), opt.extra_args.end());
  if (command.empty() || command[0].empty())
    throw ConfigError("the job has no command: set \"command\" in the job spec (e.g. [\"python3\", \"train.py\"])");
  std::error_code ec;
  workdir = fs::absolute(spec.workdir.empty() ? fs::path(".") : fs::path(spec.workdir), ec);
  if (auto r = check_command(opt.plan); r && r->code == exit_code::usage) throw ConfigError(r->message);
  (void)format_tag(opt.output.tag_format, 0, 0, 0, "stdout");  // a bad tag format fails before anything runs

  base_env = current_environment();
  helper = find_helper(opt.self_exe, opt.shim);
  const auto& plan = opt.plan;
  std::vector<int> local = local_ranks();
  local_total = static_cast<int>(local.size());
  result.ranks = plan.world_size;
  result.local_ranks = local_total;

  ctx.max_restarts = opt.max_restarts;
  ctx.run_id = plan.run_id.empty() ? fmt::format("dtrain-{}", ::getpid()) : plan.run_id;
  result.restarts = 0;
  ctx.master_addr = plan.identity.master_addr.empty() ? "127.0.0.1" : plan.identity.master_addr;
  ctx.store_addr = opt.store_addr;
  ctx.store_token = opt.store_token;
  ctx.local_addr = opt.local_addr;
  ctx.cores = sys::usable_cpus();
  ctx.agent_id = fmt::format("{}-{}", ::getpid(), rdzv::auth::new_token().substr(0, 16));
  ctx.shm_prefix = fmt::format("dtrain-{}-", ctx.agent_id);  // swept at each generation's end and at exit
  ctx.role = opt.role;

  run_folder.create(opt.log_dir, ctx.run_id, opt.keep_logs);
  if (opt.log_dir.empty() && opt.keep_logs) terminal.say(fmt::format("dtrain: logs in {}", run_folder.path().string()));
  result.run_dir = run_folder.path().string();
  ctx.plan_path = run_folder.plan_path().string();
  run_folder.write_plan(opt.plan_json);
  ctx.checkpoint_dir = run_folder.checkpoint_dir(spec.restart.checkpoint_dir, workdir).string();
  board.open(run_folder.path() / "progress", local);
  add_local_run({::getpid(), ctx.run_id, plan.identity.node_rank, result.run_dir, opt.hang_timeout_s});
}

std::vector<int> Agent::Impl::local_ranks() const {
  std::vector<int> local;
  for (const auto& r : opt.plan.ranks)
    if (r.node_rank == opt.plan.identity.node_rank) local.push_back(r.rank);
  return local;
}

// An elastic job's new generation: its node rank, world size, ranks and batch plan (the workers'
// env and DTRAIN_PLAN file), before its go spawns the workers.
void Agent::Impl::adopt_plan(const config::Plan& plan) {
  opt.plan = plan;
  opt.plan_json = config::plan_to_json(plan);
  run_folder.write_plan(opt.plan_json);
  ctx.master_addr = plan.identity.master_addr.empty() ? "127.0.0.1" : plan.identity.master_addr;
  result.ranks = plan.world_size;
  board.open(run_folder.path() / "progress", local_ranks());
}

// A bad command is reported once, before anything is spawned.
bool Agent::Impl::command_runs() {
  auto r = check_command(opt.plan);
  if (!r) return true;
  result.exit_code = r->code;
  result.reason = r->message;
  terminal.say(fmt::format("dtrain: {}", r->message));
  state = JobState::done;
  return false;
}

void Agent::Impl::start_store() {
  std::string token = rdzv::auth::new_token();
  rdzv::ServerOptions so;
  so.host = "127.0.0.1";
  so.port = 0;
  so.token = token;
  so.run_id = ctx.run_id;
  store = std::make_unique<rdzv::Server>(so);
  store->start();
  ctx.store_addr = fmt::format("127.0.0.1:{}", store->port());
  ctx.store_token = token;
  ctx.local_addr = "127.0.0.1";
  DTRAIN_DEBUG(agent, "standalone store on {}", ctx.store_addr);
}

void Agent::Impl::open_loop() {
  int rc = uv_loop_init(&loop);
  if (rc < 0) throw_os_error(rc, "cannot create the agent's event loop");
  loop_inited = true;
  group.open(&loop, {helper.exe, helper.exec_word, std::to_string(::getpid()), command, workdir.string()});
  guardian.start(&loop, helper.exe, helper.guard_word, opt.output.stderr_fd, ctx.agent_id);
  guardian.sweep_at_end(ctx.shm_prefix);
  if (opt.reap_escapees)
    escapees.start(&loop, [this] {
      auto pids = group.live_pids();
      if (long g = guardian.pid(); g > 0) pids.insert(static_cast<pid_t>(g));
      return pids;
    });
  watch_signals();
  for (auto* t : {&grace_timer, &backoff_timer, &runtime_timer, &progress_timer, &failure_timer}) {
    rc = t->init([&](uv_timer_t* h) { return uv_timer_init(&loop, h); }, this);
    if (rc < 0) throw IoError(fmt::format("uv_timer_init: {}", uv_strerror(rc)));
  }
  std::unique_lock async_lock(events_mu);  // post() reads `async` from other threads
  rc = async.init([&](uv_async_t* a) {
    return uv_async_init(&loop, a, [](uv_async_t* h) noexcept {
      auto* self = static_cast<Impl*>(h->data);
      if (self == nullptr) return;
      std::vector<Event> evs;
      {
        std::lock_guard lk(self->events_mu);
        evs.swap(self->events);
      }
      for (const auto& e : evs)
        guarded(*self, [&] {
          if (e.kind == Event::Kind::go && e.plan) self->adopt_plan(*e.plan);
          self->apply(job::Remote{e});
        });
    });
  }, this);
  if (rc < 0) throw IoError(fmt::format("uv_async_init: {}", uv_strerror(rc)));
  if (!events.empty()) uv_async_send(async.get());
}

void Agent::Impl::watch_signals() {
  const int sigs[5] = {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2};
  for (int i = 0; i < 5; ++i) {
    int rc = signals[i].init([&](uv_signal_t* s) { return uv_signal_init(&loop, s); }, this);
    if (rc < 0) throw IoError(fmt::format("uv_signal_init: {}", uv_strerror(rc)));
    uv_signal_start(signals[i].get(), [](uv_signal_t* s, int sig) noexcept {
      auto* self = static_cast<Impl*>(s->data);
      if (self != nullptr) guarded(*self, [&] { self->apply(job::Signal{sig, self->group.live()}); });
    }, sigs[i]);
  }
  std::signal(SIGPIPE, SIG_IGN);
}

void Agent::Impl::arm_runtime() {
  if (!opt.max_runtime_s || *opt.max_runtime_s <= 0) return;
  uv_timer_start(runtime_timer.get(), [](uv_timer_t* t) noexcept {
    auto* self = static_cast<Impl*>(t->data);
    if (self != nullptr) guarded(*self, [&] { self->apply(job::RuntimeOver{}); });
  }, to_ms(*opt.max_runtime_s), 0);
}

// Once a second: the workers' progress pages; a wait longer than hang_timeout_s is a hang.
void Agent::Impl::arm_progress() {
  if ((!opt.hang_timeout_s && !hooks.on_progress) || board.empty()) return;
  uv_timer_start(progress_timer.get(), [](uv_timer_t* t) noexcept {
    auto* self = static_cast<Impl*>(t->data);
    if (self != nullptr) guarded(*self, [&] { self->check_progress(); });
  }, 1000, 1000);
}

void Agent::Impl::check_progress() {
  if (machine.state() != JobState::running) return;
  auto pages = board.snapshot();
  Diagnosis d = diagnose(pages, progress::now_ns(), opt.hang_timeout_s.value_or(kStuckAfterS));
  bool used = std::any_of(pages.begin(), pages.end(), [](const RankProgress& r) { return r.page.valid; });
  if (used && hooks.on_progress) hooks.on_progress(diagnosis_text(d));
  if (!d.hung || !opt.hang_timeout_s) return;
  result.hang = d.lines;
  apply(job::Hung{fmt::format("hang: {} (output.hang_timeout_s {})", d.verdict, *opt.hang_timeout_s)});
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
    std::lock_guard lk(events_mu);
    events_closed = true;
    async.close();
  }
  for (auto& s : signals) s.close();
  grace_timer.close();
  backoff_timer.close();
  runtime_timer.close();
  progress_timer.close();
  failure_timer.close();
  group.close_timer();
  escapees.close();
  guardian.release();
}

void Agent::Impl::close_loop() {
  // also the exception path: nothing may survive us
  closing = true;
  group.kill_now();
  escapees.kill_all(2000);
  close_control_handles();
  state = JobState::done;
  uv_run(&loop, UV_RUN_DEFAULT);  // reaps workers and the guardian, runs close callbacks
  group.close();
  guardian.close();
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
  if (machine.collecting() && group.finished()) apply(job::Drained{group.exits()});
}

void Agent::Impl::execute(const job::Enter& a) {
  if (a.state == JobState::starting) group.clear_retired();
  state = a.state;
  if (hooks.on_state) hooks.on_state(a.state, machine.generation());
  terminal.update_progress();
}

void Agent::Impl::execute(const job::Spawn& a) {
  group.clear_retired();
  ctx.generation = a.generation;
  ctx.master_port = a.master_port ? *a.master_port : net::pick_free_port("0.0.0.0");
  auto logs = run_folder.attempt(a.generation);
  if (logs) result.logs = logs->string();
  for (const auto& r : opt.plan.ranks) {
    if (r.node_rank != opt.plan.identity.node_rank) continue;
    try {
      EnvMap env = worker_env(opt.plan, r, ctx, base_env);
      if (std::string page = board.reset(r.rank); !page.empty()) env["DTRAIN_PROGRESS_FILE"] = page;
      group.spawn(r, env, logs);
    } catch (const std::exception& e) {
      return apply(job::SpawnFailed{e.what(), exit_status_of(e)});
    }
  }
  apply(job::Spawned{});  // a job of zero local workers is over at once
}

void Agent::Impl::execute(const job::Kill& a) {
  group.kill(a.sig, a.stopping);
  if (!a.arm_grace || group.live() == 0) return;
  uv_timer_start(grace_timer.get(), [](uv_timer_t* t) noexcept {
    auto* self = static_cast<Impl*>(t->data);
    if (self != nullptr) guarded(*self, [&] { self->apply(job::GraceOver{self->group.live()}); });
  }, to_ms(opt.grace_s), 0);
}

void Agent::Impl::execute(const job::LocalFailure& a) {
  if (a.exit.exec_errno != 0)
    terminal.say(fmt::format("dtrain: rank {}: cannot execute '{}': {}", a.exit.rank, command[0],
                             std::strerror(a.exit.exec_errno)));
  pending_failure.emplace(a.exit, machine.generation());
  flush_failure(false);
  if (!pending_failure) return;
  // a process that left the worker's group may hold its stderr: the others hear of it soon anyway
  uv_timer_start(failure_timer.get(), [](uv_timer_t* t) noexcept {
    auto* self = static_cast<Impl*>(t->data);
    if (self != nullptr) guarded(*self, [&] { self->flush_failure(true); });
  }, kTailWaitMs, 0);
}

// The hooks hear of the failure with the last lines of its stderr: once that worker's output is
// read (or, `force`, when the generation ends and a process that escaped still holds its pipe).
void Agent::Impl::flush_failure(bool force) {
  if (!pending_failure || !hooks.on_local_failure) return pending_failure.reset();
  auto& [exit, generation] = *pending_failure;
  if (!force && !group.output_done(exit.pid)) return;
  exit.last_stderr = group.stderr_tail(exit.pid);
  auto [w, g] = std::move(*pending_failure);
  pending_failure.reset();
  hooks.on_local_failure(w, g);
}

void Agent::Impl::execute(const job::ArmBackoff&) {
  uv_timer_start(backoff_timer.get(), [](uv_timer_t* t) noexcept {
    auto* self = static_cast<Impl*>(t->data);
    if (self != nullptr) guarded(*self, [&] { self->apply(job::BackoffOver{}); });
  }, to_ms(opt.backoff_s), 0);
}

void Agent::Impl::execute(const job::Collect& a) {
  flush_failure(true);
  uv_timer_stop(grace_timer.get());
  group.retire();
  escapees.kill_all(1000);  // what left a worker's group dies with the generation
  sweep_segments();
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
  close_control_handles();   // the guardian's stdin reaches EOF: it exits (its list is empty by now)
  sweep_segments();
  if (store) store->stop();  // every worker is gone; overlaps with the guardian's exit
  if (a.exit_code != 0) {
    std::string text = summary_text(result);
    if (!text.empty()) write_all(opt.output.stderr_fd, text);
  } else if (!opt.external_start) {  // a multi-node job says so after its exit barrier (multinode.cpp)
    write_all(opt.output.stderr_fd, success_line(result) + "\n");
  }
  if (opt.summary_json.empty()) return;
  std::string js = summary_json(result);
  int fd = ::open(opt.summary_json.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || !write_all(fd, js))
    terminal.say(fmt::format("dtrain: cannot write the summary to {}: {}", opt.summary_json, errno_text(errno)));
  if (fd >= 0) ::close(fd);
}

void Agent::Impl::fatal(const std::exception& e) {
  DTRAIN_ERROR(agent, "{}", e.what());
  if (closing) return;
  try {
    apply(job::Fatal{e.what()});
  } catch (...) {
    group.kill(SIGKILL);
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
  std::lock_guard lk(impl_->events_mu);
  if (impl_->events_closed) return;
  impl_->events.push_back(std::move(e));
  if (impl_->async) uv_async_send(impl_->async.get());
}

int exec_shim_main(int argc, char** argv) { return dtrain_shim_exec(argc, argv, "dtrain __exec"); }
int guardian_main(int, char**) { return dtrain_shim_guard(); }

}  // namespace dtrain::agent
