// The agent's orchestration (agent_impl.hpp): one libuv loop turns what happens (worker exits,
// output ends, signals, timers, events from other nodes) into inputs of the job state machine
// (job_machine.hpp) and carries out the actions it returns with its collaborators.
#include "agent_impl.hpp"


#include <csignal>
#include <cstring>

#include "dtrain/agent/stacks.hpp"
#include "dtrain/common/errors.hpp"
#include "dtrain/common/exit_codes.hpp"
#include "dtrain/common/log.hpp"
#include "dtrain/common/net.hpp"
#include "failure_report.hpp"
#include "shim.h"

namespace dtrain::agent {

namespace {

// The launch's own part of the job's policy (the job's settings are read from the plan's spec).
JobPolicy policy_of(const AgentOptions& o) {
  JobPolicy p;
  p.external_start = o.external_start;
  p.master_port = o.master_port ? o.master_port : o.plan.identity.master_port;
  p.first_generation = o.first_generation;
  return p;
}

}  // namespace

Agent::Impl::Impl(AgentOptions o, AgentHooks h)
    : opt(std::move(o)),
      hooks(std::move(h)),
      machine(opt.plan.spec, policy_of(opt)),
      terminal(opt.output.stdout_fd, opt.output.stderr_fd, opt.progress),
      router(opt.plan.spec.output, opt.output, terminal),
      gen(router, guardian, reaper, *this),
      watch(gen.board(), opt.plan.spec.output.hang_timeout_s, hooks.on_progress,
            [this](const ProgressWatch::Hang& hang) { hung(hang); },
            [this](int rank) {
              auto w = gen.group().running(rank);
              return w ? w->pid : 0L;
            }),
      notice({[this](long pid) { return gen.group().output_done(pid); },
              [this](WorkerExit& w) { gen.group().stderr_of(w); }},
             hooks.on_local_failure ? FailureNotice::Send([this](WorkerExit& w, int g) {
               explain_exit(w);
               hooks.on_local_failure(w, g);
             })
                                    : FailureNotice::Send()) {
  watch.warn_stragglers(opt.plan.spec.output.straggler_share,
                        [this](const std::string& line) { terminal.say("dtrain: " + line); });
  if (hooks.on_figures) watch.share_figures(opt.plan.instances, hooks.on_figures, hooks.peer_figures);
  terminal.set_progress_source([this] {
    return progress_text({state.load(), result.restarts, opt.plan.spec.restart.max_restarts, gen.group().live(),
                          result.local_ranks, machine.waiting_for_go()});
  });
}

int Agent::Impl::run() {
  prepare();
  if (!command_runs()) return result.exit_code;
  if (opt.embed_store && opt.store_addr.empty()) {
    store.start(loop, context->run_id());
    context->use_store(store.addr(), store.token());
  }
  open_loop();
  if (const auto& max_runtime_s = opt.plan.spec.max_runtime_s; max_runtime_s && *max_runtime_s > 0)
    runtime.start(*max_runtime_s);
  apply(job::Start{});
  loop.run();
  return result.exit_code;
}

// The loop's handles: the workers' status pipe, signals, timers, the inbox.
void Agent::Impl::open_loop() {
  gen.group().open(loop.get(), {context->command(), context->workdir().string()});
  signals.open(loop, {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2},
               [this](int sig) { apply(job::Signal{sig, gen.group().live()}); });
  std::signal(SIGPIPE, SIG_IGN);
  grace.open(loop, [this] { apply(job::GraceOver{gen.group().live()}); });
  backoff.open(loop, [this] { apply(job::BackoffOver{}); });
  runtime.open(loop, [this] { apply(job::RuntimeOver{}); });
  watch.open(loop);
  notice.open(loop);
  inbox.open(loop, [this](const Event& e) {
    if (e.kind == Event::Kind::go && e.plan) adopt_plan(*e.plan);
    // the job hangs, seen on another node: this node's stacks go in its summary too
    if (e.kind == Event::Kind::abort && e.exit_code == exit_code::hang && machine.state() == JobState::running)
      record_stacks();
    apply(job::Remote{e});
  });
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
  explain(w, context->interpreter(opt.plan));
}

void Agent::Impl::execute(const job::Enter& a) {
  if (a.state == JobState::starting) gen.group().clear_retired();
  state = a.state;
  watch.running(a.state == JobState::running);
  if (hooks.on_state) hooks.on_state(a.state, machine.generation());
  terminal.update_progress();
}

void Agent::Impl::execute(const job::Spawn& a) {
  gen.begin();
  context->begin_generation(a.generation, a.master_port ? *a.master_port : net::pick_free_port("0.0.0.0"));
  auto logs = run_folder.attempt(a.generation);
  if (logs) result.logs = logs->string();
  const CpuBinding binding = context->cpu_binding(opt.plan);
  report_bindings(binding);
  for (const auto& r : opt.plan.ranks) {
    if (r.node_rank != opt.plan.identity.node_rank) continue;
    const auto local = static_cast<std::size_t>(r.local_rank);
    const RankCpus* cpus = local < binding.ranks.size() ? &binding.ranks[local] : nullptr;
    try {
      gen.spawn(r, context->worker_env(opt.plan, r, cpus), run_folder.attempt_path(a.generation), logs,
                opt.reap_escapees, cpus != nullptr ? cpus->cpus : std::vector<int>{});
    } catch (const std::exception& e) {
      return apply(job::SpawnFailed{e.what(), exit_status_of(e)});
    }
  }
  apply(job::Spawned{});  // a job of zero local workers is over at once
}

// One line per local rank with the CPUs it is bound to (as mpirun's --report-bindings), and how
// they share them; said at the first generation and again when a new one is bound otherwise.
void Agent::Impl::report_bindings(const CpuBinding& b) {
  std::vector<std::string> lines;
  for (const auto& note : b.notes) lines.push_back(fmt::format("dtrain: cpu-bind {}: {}", opt.plan.spec.cluster.cpu_bind, note));
  for (const auto& r : opt.plan.ranks) {
    const auto local = static_cast<std::size_t>(r.local_rank);
    if (r.node_rank == opt.plan.identity.node_rank && local < b.ranks.size())
      lines.push_back(fmt::format("dtrain: rank {} (local rank {}) bound to {}", r.rank, r.local_rank, b.ranks[local].describe()));
  }
  if (lines == bindings_said) return;
  bindings_said = lines;
  for (const auto& line : lines) terminal.say(line);
}

void Agent::Impl::execute(const job::Kill& a) {
  gen.group().kill(a.sig, a.stopping);
  if (a.grace_s && gen.group().live() > 0) grace.start(*a.grace_s);
}

void Agent::Impl::execute(const job::LocalFailure& a) {
  if (a.exit.cpus_error)
    terminal.say(fmt::format("dtrain: rank {}: cannot bind it to its CPUs: {} (has this agent's cpuset shrunk since "
                             "it started? --cpu-bind none runs it unbound)",
                             a.exit.rank, std::strerror(a.exit.exec_errno)));
  else if (a.exit.exec_errno != 0)
    terminal.say(fmt::format("dtrain: rank {}: cannot {} '{}': {}", a.exit.rank,
                             a.exit.workdir_error ? "enter the workdir" : "execute",
                             a.exit.workdir_error ? context->workdir().string() : context->command()[0],
                             std::strerror(a.exit.exec_errno)));
  notice.hold(a.exit, machine.generation());
}

void Agent::Impl::execute(const job::Collect& a) {
  notice.flush(true);
  grace.stop();
  gen.end(context->shm_prefix());
  terminal.flush();
  result.root_cause = a.root_cause;
  result.other_failures = a.other_failures;
}

void Agent::Impl::execute(const job::Finish& a) {
  if (a.reason) result.reason = *a.reason;
  result.exit_code = a.exit_code;
  result.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  execute(job::Enter{JobState::done});
  result.stragglers = watch.straggler_lines();
  terminal.clear_progress();
  gen.sweep_segments(context->shm_prefix());
  close_control_handles();  // the guardian's stdin reaches EOF: it exits (its list is empty by now)
  store.stop();             // every worker is gone; overlaps with the guardian's exit
  // a multi-node job reports once the nodes agree on the root cause, after its exit barrier (multinode.cpp)
  if (!opt.external_start) write_summary(result, opt.output.stderr_fd, opt.summary_json);
}

// A hang: the rank the job hangs on, when it is one of this node's, is its root cause (alive, exit 70).
void Agent::Impl::hung(const ProgressWatch::Hang& hang) {
  if (machine.state() != JobState::running || machine.stop_reason() != StopReason::none) return;
  result.hang = hang.lines;
  record_stacks();
  std::optional<WorkerExit> culprit = hang.culprit >= 0 ? gen.group().running(hang.culprit) : std::nullopt;
  if (culprit) {
    culprit->exit_code = exit_code::hang;
    culprit->hang_state = hang.state;
    culprit->hang = hang.blame;
  }
  apply(job::Hung{hang.reason, culprit});
  // a stopped worker acts on the SIGTERM it was sent once it runs again: no grace period spent on it
  if (culprit && hang.state.rfind('T', 0) == 0) ::kill(-static_cast<pid_t>(culprit->pid), SIGCONT);
}

// Every local rank's Python stack, before the ranks are stopped (the loop waits for them, 2 s at most).
void Agent::Impl::record_stacks() {
  if (gen.board().empty() || !result.stacks.empty()) return;
  std::vector<int> ranks;
  for (const auto& r : opt.plan.ranks)
    if (r.node_rank == opt.plan.identity.node_rank) ranks.push_back(r.rank);
  auto stacks = dump_stacks(gen.board().dir(), ranks);
  result.stack_summary = stack_summary(stacks);
  result.stacks = stack_lines(stacks);
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
  notice.flush(false);
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
void Agent::post(Event e) { impl_->inbox.post(std::move(e)); }

int guardian_main(int, char**) { return dtrain_shim_guard(); }

}  // namespace dtrain::agent
