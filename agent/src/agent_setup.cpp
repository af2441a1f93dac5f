// Agent::Impl before its loop runs (agent_impl.hpp): the command, the run folder and the workers'
// env context, the standalone store, and the plan of an elastic job's later generation.
#include <unistd.h>

#include "agent_impl.hpp"
#include "dtrain/agent/hang.hpp"
#include "dtrain/agent/line_prefix.hpp"
#include "dtrain/common/errors.hpp"
#include "dtrain/common/exit_codes.hpp"
#include "dtrain/common/log.hpp"
#include "dtrain/common/system.hpp"
#include "dtrain/rendezvous/store/auth.hpp"

namespace dtrain::agent {

Agent::Impl::~Impl() {
  if (loop_inited) close_loop();
  if (store) store->stop();
  gen.sweep_segments(setup.ctx.shm_prefix);
  remove_local_run(::getpid());
}

void Agent::Impl::prepare() {
  started = std::chrono::steady_clock::now();
  const auto& spec = opt.plan.spec;
  auto& command = setup.command;
  command = spec.command;
  command.insert(command.end(), opt.extra_args.begin(), opt.extra_args.end());
  if (command.empty() || command[0].empty())
    throw ConfigError("the job has no command: set \"command\" in the job spec (e.g. [\"python3\", \"train.py\"])");
  std::error_code ec;
  setup.workdir = fs::absolute(spec.workdir.empty() ? fs::path(".") : fs::path(spec.workdir), ec);
  if (auto r = check_command(opt.plan); r && r->code == exit_code::usage) throw ConfigError(r->message);
  (void)format_tag(spec.output.tag_format, 0, 0, 0, "stdout");  // a bad tag format fails before anything runs

  setup.base_env = current_environment();
  setup.guardian_program = find_guardian_program(opt.self_exe, opt.shim);
  const auto& plan = opt.plan;
  std::vector<int> local = local_ranks();
  setup.local_total = static_cast<int>(local.size());
  result.ranks = plan.world_size;
  result.local_ranks = setup.local_total;
  result.node_rank = plan.identity.node_rank;

  auto& ctx = setup.ctx;
  ctx.run_id = plan.run_id.empty() ? fmt::format("dtrain-{}", ::getpid()) : plan.run_id;
  result.restarts = 0;
  ctx.master_addr = plan.identity.master_addr.empty() ? "127.0.0.1" : plan.identity.master_addr;
  ctx.store_addr = opt.store_addr;
  ctx.store_token = opt.store_token;
  ctx.store_env = opt.store_env;
  ctx.local_addr = opt.local_addr;
  ctx.cores = sys::usable_cpus();
  ctx.agent_id = fmt::format("{}-{}", ::getpid(), rdzv::auth::new_token().substr(0, 16));
  ctx.shm_prefix = fmt::format("dtrain-{}-", ctx.agent_id);  // swept at each generation's end and at exit
  ctx.role = opt.role;
  start_guardian();

  const std::string log_dir = spec.output.log_dir.value_or("");
  run_folder.create(log_dir, ctx.run_id, opt.keep_logs);
  if (log_dir.empty() && opt.keep_logs) terminal.say(fmt::format("dtrain: logs in {}", run_folder.path().string()));
  result.run_dir = run_folder.path().string();
  ctx.plan_path = run_folder.plan_path().string();
  run_folder.write_plan(config::plan_to_json(plan));
  ctx.checkpoint_dir = run_folder.checkpoint_dir(spec.restart.checkpoint_dir, setup.workdir).string();
  for (const auto& f : run_folder.temporary_folders()) guardian.remove_at_end(f.string());
  gen.board().open(run_folder.path(), local);
  add_local_run({::getpid(), ctx.run_id, plan.identity.node_rank, result.run_dir, spec.output.hang_timeout_s});
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
  run_folder.write_plan(config::plan_to_json(plan));
  setup.ctx.master_addr = plan.identity.master_addr.empty() ? "127.0.0.1" : plan.identity.master_addr;
  result.ranks = plan.world_size;
  result.node_rank = plan.identity.node_rank;
  gen.board().open(run_folder.path(), local_ranks());
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
  so.run_id = setup.ctx.run_id;
  store = std::make_unique<rdzv::Server>(so);
  store->start(/*serve_now=*/false);
  // Its thread starts with the first connection: a job whose workers never use the store (a plain
  // local launch) does not pay for starting and joining it.
  int rc = store_watch.init([&](uv_poll_t* p) { return uv_poll_init(&loop, p, store->listen_fd()); }, this);
  if (rc == 0)
    rc = uv_poll_start(store_watch.get(), UV_READABLE, [](uv_poll_t* p, int, int) noexcept {
      auto* self = static_cast<Impl*>(p->data);
      if (self == nullptr) return;
      self->store_watch.close();
      guarded(*self, [&] { self->store->serve(); });
    });
  if (rc < 0) store->serve();  // no watch: serve at once
  setup.ctx.store_addr = fmt::format("127.0.0.1:{}", store->port());
  setup.ctx.store_token = token;
  setup.ctx.local_addr = "127.0.0.1";
  DTRAIN_DEBUG(agent, "standalone store on {}", setup.ctx.store_addr);
}

}  // namespace dtrain::agent
