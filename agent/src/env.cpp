#include "dtrain/agent/env.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/worker_env.hpp"

extern char** environ;

namespace dtrain::agent {

namespace {

// Every name set here is in the one list of contract variables (common/worker_env.hpp).
void put(EnvMap& env, const char* name, const std::string& value) {
  DTRAIN_CHECK(worker_env::find(name) != nullptr, "{} is missing from the worker_env list", name);
  env[name] = value;
}
void put(EnvMap& env, const char* name, std::int64_t value) { put(env, name, std::to_string(value)); }

#ifndef DTRAIN_PYTHON_SITE_FROM_BIN
#define DTRAIN_PYTHON_SITE_FROM_BIN "python"
#endif
// The folder of the `dtrain` Python package that belongs to this dtrain binary: <build>/python next
// to the build tree's binary, else the install's site folder (DTRAIN_PYTHON_SITE_FROM_BIN, relative
// to the binary's folder, defined by python/CMakeLists.txt); "" when neither holds the package.
const std::string& python_package_dir() {
  static const std::string dir = [] {
    std::error_code ec;
    const auto bin = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path();
    if (ec) return std::string();
    for (const auto& d : {bin / "python", bin / DTRAIN_PYTHON_SITE_FROM_BIN})
      if (std::filesystem::exists(d / "dtrain" / "__init__.py", ec)) return d.lexically_normal().string();
    return std::string();
  }();
  return dir;
}

}  // namespace

EnvMap worker_env(const config::Plan& plan, const config::RankInfo& r, const EnvContext& ctx,
                  const EnvMap& base, int threads) {
  EnvMap env = base;
  for (const auto& [k, v] : plan.spec.env) env[k] = v;
  // Workers import `dtrain` and `dtrain.torch` with no PYTHONPATH of their own (theirs stays after),
  // and run dtrain's start-up hook (python/dtrain/_startup/sitecustomize.py: stacks on a signal,
  // torch.distributed's calls on the progress page), which runs the sitecustomize it hides.
  if (const std::string& py = python_package_dir(); !py.empty()) {
    const std::string ours = py + "/dtrain/_startup:" + py;
    const auto user = env.find("PYTHONPATH");
    env["PYTHONPATH"] = user == env.end() || user->second.empty() ? ours : ours + ":" + user->second;
  }

  const int local_world = plan.procs_per_instance;
  put(env, "RANK", r.rank);
  put(env, "LOCAL_RANK", r.local_rank);
  put(env, "WORLD_SIZE", plan.world_size);
  put(env, "LOCAL_WORLD_SIZE", local_world);
  put(env, "GROUP_RANK", r.node_rank);
  put(env, "GROUP_WORLD_SIZE", plan.instances);
  put(env, "ROLE_NAME", ctx.role);
  put(env, "ROLE_RANK", r.rank);
  put(env, "ROLE_WORLD_SIZE", plan.world_size);
  put(env, "MASTER_ADDR", ctx.master_addr);
  put(env, "MASTER_PORT", ctx.master_port);
  put(env, "TORCHELASTIC_RESTART_COUNT", ctx.generation);
  put(env, "TORCHELASTIC_MAX_RESTARTS", plan.spec.restart.max_restarts);
  put(env, "TORCHELASTIC_RUN_ID", ctx.run_id);
  put(env, "TORCHELASTIC_USE_AGENT_STORE", std::string("False"));
  put(env, "DTRAIN_RUN_ID", ctx.run_id);
  put(env, "DTRAIN_GENERATION", ctx.generation);
  put(env, "DTRAIN_NODE_RANK", r.node_rank);
  put(env, "DTRAIN_NNODES", plan.instances);
  put(env, "DTRAIN_WORLD_SIZE", plan.world_size);
  if (!ctx.store_addr.empty()) {
    put(env, "DTRAIN_STORE_ADDR", ctx.store_addr);
    put(env, "DTRAIN_STORE_TOKEN", ctx.store_token);
    for (const auto& [k, v] : ctx.store_env) put(env, k.c_str(), v);
  }
  put(env, "DTRAIN_LOCAL_ADDR", ctx.local_addr);
  const config::Coords c = plan.layout.coords(r.rank);
  put(env, "DTRAIN_DP_RANK", c.dp);
  put(env, "DTRAIN_DP_SIZE", plan.layout.data);
  put(env, "DTRAIN_PP_RANK", c.pp);
  put(env, "DTRAIN_PP_SIZE", plan.layout.pipeline);
  put(env, "DTRAIN_TP_RANK", c.tp);
  put(env, "DTRAIN_TP_SIZE", plan.layout.tensor);
  put(env, "DTRAIN_PARALLEL_ORDER", plan.layout.order_text());
  put(env, "DTRAIN_PP_SCHEDULE", plan.schedule);
  put(env, "DTRAIN_MICRO_BATCHES", plan.batch ? plan.batch->micro_batches : plan.spec.batch.micro_batches);
  if (plan.batch) {
    const auto& b = *plan.batch;
    put(env, "DTRAIN_GLOBAL_BATCH", b.global);
    put(env, "DTRAIN_PER_REPLICA_BATCH", b.per_replica);
    put(env, "DTRAIN_MICRO_BATCH_SIZE", b.micro_batch_size);
    put(env, "DTRAIN_EPOCHS", b.epochs);
    if (b.dataset_size) put(env, "DTRAIN_DATASET_SIZE", *b.dataset_size);
    if (b.iterations_per_epoch) put(env, "DTRAIN_ITERATIONS_PER_EPOCH", *b.iterations_per_epoch);
    if (b.total_iterations) put(env, "DTRAIN_TOTAL_ITERATIONS", *b.total_iterations);
    if (b.learning_rate) {  // batch.learning_rate scaled to this generation's global batch
      put(env, "DTRAIN_LEARNING_RATE", fmt::format("{}", *b.learning_rate));
      put(env, "DTRAIN_WARMUP_ITERATIONS", b.warmup_iterations);
    }
  }
  if (!ctx.plan_path.empty()) put(env, "DTRAIN_PLAN", ctx.plan_path);
  if (!ctx.checkpoint_dir.empty()) put(env, "DTRAIN_CHECKPOINT_DIR", ctx.checkpoint_dir);
  if (!ctx.agent_id.empty()) put(env, "DTRAIN_AGENT_ID", ctx.agent_id);
  if (!ctx.shm_prefix.empty()) put(env, "DTRAIN_SHM_PREFIX", ctx.shm_prefix);
  if (plan.use_gpus && plan.spec.cluster.bind_gpus) put(env, "CUDA_VISIBLE_DEVICES", r.local_rank);
  if (env.find("OMP_NUM_THREADS") == env.end())
    put(env, "OMP_NUM_THREADS", threads > 0 ? threads : std::max(1, ctx.cores / std::max(1, local_world)));
  return env;
}

EnvMap current_environment() {
  EnvMap env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq == nullptr) continue;
    env.emplace(std::string(*e, static_cast<std::size_t>(eq - *e)), std::string(eq + 1));
  }
  return env;
}

}  // namespace dtrain::agent
