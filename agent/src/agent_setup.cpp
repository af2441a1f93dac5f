// Agent::Impl before its loop runs and after (agent_impl.hpp): the start-up context, the loop and
// the guardian, the run folder, the plan of an elastic job's later generation, and the teardown
// that leaves nothing behind.
#include <unistd.h>

#include "agent_impl.hpp"
#include "dtrain/agent/hang.hpp"
#include "dtrain/common/log.hpp"

namespace dtrain::agent {

Agent::Impl::~Impl() {
  if (loop.is_open()) close_loop();
  store.stop();
  if (context) gen.sweep_segments(context->shm_prefix());
  remove_local_run(::getpid());
}

void Agent::Impl::prepare() {
  started = std::chrono::steady_clock::now();
  context.emplace(opt, current_environment());
  const auto& plan = opt.plan;
  const auto& spec = plan.spec;
  std::vector<int> local = local_ranks(plan);
  result.ranks = plan.world_size;
  result.local_ranks = static_cast<int>(local.size());
  result.node_rank = plan.identity.node_rank;
  result.restarts = 0;
  start_guardian();

  const std::string log_dir = spec.output.log_dir.value_or("");
  run_folder.create(log_dir, context->run_id(), opt.keep_logs);
  if (log_dir.empty() && opt.keep_logs) terminal.say(fmt::format("dtrain: logs in {}", run_folder.path().string()));
  result.run_dir = run_folder.path().string();
  run_folder.write_plan(config::plan_to_json(plan));
  context->use_run_folder(run_folder.plan_path().string(),
                          run_folder.checkpoint_dir(spec.restart.checkpoint_dir, context->workdir()).string());
  for (const auto& f : run_folder.temporary_folders()) guardian.remove_at_end(f.string());
  gen.board().open(run_folder.path(), local);
  if (hooks.on_ranks) hooks.on_ranks(result.run_dir, local);
  add_local_run({::getpid(), context->run_id(), plan.identity.node_rank, result.run_dir, spec.output.hang_timeout_s});
}

// The loop and the guardian, first of all: the guardian's start (two forks and an exec, none of
// which the agent waits for) overlaps with the rest of the set-up.
void Agent::Impl::start_guardian() {
  loop.open([this](const std::exception& e) { fatal(e); });
  reaper.start(loop.get(), opt.reap_escapees);
  const auto& program = context->guardian_program();
  guardian.start(loop.get(), program.exe, program.guard_word, opt.output.stderr_fd, context->agent_id(),
                 [this](const std::string& message) { fatal(IoError(message)); });
  guardian.sweep_at_end(context->shm_prefix());
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

// An elastic job's new generation: its node rank, world size, ranks and batch plan (the workers'
// env and DTRAIN_PLAN file), before its go spawns the workers.
void Agent::Impl::adopt_plan(const config::Plan& plan) {
  opt.plan = plan;
  run_folder.write_plan(config::plan_to_json(plan));
  context->adopt(plan);
  result.ranks = plan.world_size;
  result.node_rank = plan.identity.node_rank;
  gen.board().open(run_folder.path(), local_ranks(plan));
  if (hooks.on_ranks) hooks.on_ranks(result.run_dir, local_ranks(plan));
}

// Also the exception path: nothing may survive us.
void Agent::Impl::close_loop() {
  closing = true;
  guardian.settle();
  gen.group().kill_now();
  gen.kill_escapees(2000);
  close_control_handles();
  state = JobState::done;
  loop.run();  // reaps the workers, sees the guardian end, runs close callbacks
  gen.group().close();
  guardian.close();
  reaper.close();
  loop.close();
}

// The inbox, signal watchers, timers and the guardian's stdin: everything but the workers.
void Agent::Impl::close_control_handles() {
  inbox.close();
  signals.close();
  for (auto* t : {&grace, &backoff, &runtime}) t->close();
  watch.close();
  notice.close();
  store.close_watch();
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
    gen.sweep_segments(context->shm_prefix());
    run_folder.remove();
    guardian.all_clear();
  }
  guardian.release();
  if (clear) guardian.forsake();
}

}  // namespace dtrain::agent
