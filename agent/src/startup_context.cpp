// What the workers are started with (startup_context.hpp).
#include "startup_context.hpp"

#include <unistd.h>

#include <charconv>

#include <fmt/format.h>

#include "dtrain/agent/check_command.hpp"
#include "dtrain/agent/line_prefix.hpp"
#include "dtrain/common/errors.hpp"
#include "dtrain/common/exit_codes.hpp"
#include "dtrain/common/system.hpp"
#include "dtrain/common/text.hpp"
#include "dtrain/rendezvous/store/auth.hpp"
#include "cpu_topology.hpp"
#include "failure_report.hpp"

namespace dtrain::agent {

namespace fs = std::filesystem;

namespace {

std::string master_addr_of(const config::Plan& plan) {
  return plan.identity.master_addr.empty() ? "127.0.0.1" : plan.identity.master_addr;
}

}  // namespace

StartupContext::StartupContext(const AgentOptions& o, EnvMap base_env) : base_env_(std::move(base_env)) {
  const auto& spec = o.plan.spec;
  command_ = spec.command;
  command_.insert(command_.end(), o.extra_args.begin(), o.extra_args.end());
  if (command_.empty() || command_[0].empty())
    throw ConfigError("the job has no command: set \"command\" in the job spec (e.g. [\"python3\", \"train.py\"])");
  std::error_code ec;
  workdir_ = fs::absolute(spec.workdir.empty() ? fs::path(".") : fs::path(spec.workdir), ec);
  if (auto r = check_command(o.plan); r && r->code == exit_code::usage) throw ConfigError(r->message);
  (void)format_tag(spec.output.tag_format, 0, 0, 0, "stdout");  // a bad tag format fails before anything runs
  guardian_ = find_guardian_program(o.self_exe, o.shim);

  ctx_.run_id = o.plan.run_id.empty() ? fmt::format("dtrain-{}", ::getpid()) : o.plan.run_id;
  ctx_.master_addr = master_addr_of(o.plan);
  ctx_.store_addr = o.store_addr;
  ctx_.store_token = o.store_token;
  ctx_.store_env = o.store_env;
  ctx_.local_addr = o.local_addr;
  ctx_.cores = sys::usable_cpus();
  ctx_.agent_id = fmt::format("{}-{}", ::getpid(), rdzv::auth::new_token().substr(0, 16));
  ctx_.shm_prefix = fmt::format("dtrain-{}-", ctx_.agent_id);  // swept at each generation's end and at exit
  ctx_.role = o.role;
}

void StartupContext::use_store(const std::string& addr, const std::string& token) {
  ctx_.store_addr = addr;
  ctx_.store_token = token;
  ctx_.local_addr = "127.0.0.1";
}

void StartupContext::use_run_folder(const std::string& plan_path, const std::string& checkpoint_dir) {
  ctx_.plan_path = plan_path;
  ctx_.checkpoint_dir = checkpoint_dir;
}

void StartupContext::adopt(const config::Plan& plan) { ctx_.master_addr = master_addr_of(plan); }

void StartupContext::begin_generation(int generation, int master_port) {
  ctx_.generation = generation;
  ctx_.master_port = master_port;
}

EnvMap StartupContext::worker_env(const config::Plan& plan, const config::RankInfo& r, const RankCpus* cpus) const {
  return agent::worker_env(plan, r, ctx_, base_env_, cpus != nullptr ? cpus->threads() : 0);
}

CpuBinding StartupContext::cpu_binding(const config::Plan& plan) {
  const CpuBind mode = cpu_bind_of(plan.spec.cluster.cpu_bind);
  if (mode == CpuBind::none) return {};
  if (!cpus_) {
    cpus_ = read_cpu_topology(allowed_cpus());
    if (plan.use_gpus) gpu_nodes_ = gpu_numa_nodes();
  }
  const int local = static_cast<int>(local_ranks(plan).size());
  std::vector<int> gpu_nodes;
  for (int gpu : local_gpus(plan, base_env_, local)) {
    auto it = gpu_nodes_.find(gpu);
    gpu_nodes.push_back(it == gpu_nodes_.end() ? -1 : it->second);
  }
  return bind_cpus(*cpus_, mode, local, gpu_nodes);
}

const std::string& StartupContext::interpreter(const config::Plan& plan) {
  if (!interpreter_) {
    auto path = base_env_.find("PATH");
    std::string path_var = plan.spec.env.count("PATH") ? plan.spec.env.at("PATH")
                           : path != base_env_.end()    ? path->second
                                                        : "/usr/local/bin:/usr/bin:/bin";
    interpreter_ = python_interpreter(command_, path_var, workdir_);
  }
  return *interpreter_;
}

std::vector<int> local_gpus(const config::Plan& plan, const EnvMap& base_env, int local) {
  if (!plan.use_gpus) return {};
  std::vector<int> visible;
  const std::string* cvd = nullptr;
  if (auto it = plan.spec.env.find("CUDA_VISIBLE_DEVICES"); it != plan.spec.env.end()) cvd = &it->second;
  else if (auto jt = base_env.find("CUDA_VISIBLE_DEVICES"); jt != base_env.end()) cvd = &jt->second;
  if (!plan.spec.cluster.bind_gpus && cvd != nullptr)
    for (const auto& entry : text::split(*cvd, ',')) {
      int index = -1;
      auto [p, ec] = std::from_chars(entry.data(), entry.data() + entry.size(), index);
      visible.push_back(ec == std::errc{} && p == entry.data() + entry.size() ? index : -1);
    }
  std::vector<int> out;
  for (int i = 0; i < local; ++i)
    out.push_back(visible.empty() ? i : i < static_cast<int>(visible.size()) ? visible[static_cast<std::size_t>(i)] : -1);
  return out;
}

std::vector<int> local_ranks(const config::Plan& plan) {
  std::vector<int> local;
  for (const auto& r : plan.ranks)
    if (r.node_rank == plan.identity.node_rank) local.push_back(r.rank);
  return local;
}

}  // namespace dtrain::agent
