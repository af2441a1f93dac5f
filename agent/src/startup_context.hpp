#pragma once
// What every worker of this node is started with, worked out once before the loop runs: the
// command (spec.command, then the launch's extra arguments) and the absolute workdir, the agent's
// own environment, the guardian's program, and the env context (run id, master address, the store,
// this agent's id and its workers' shared-memory prefix, the plan file and checkpoint folder); per
// generation its number and MASTER_PORT. worker_env() (env.hpp) makes each worker's environment
// from it. A bad command or tag format is refused here, before anything runs.
// tests/agent/test_startup_context.cpp.
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dtrain/agent/env.hpp"
#include "dtrain/agent/options.hpp"
#include "cpu_binding.hpp"
#include "resolve_command.hpp"

namespace dtrain::agent {

class StartupContext {
 public:
  // Throws ConfigError: no command, a command whose check says usage (an empty one, a workdir that
  // is no folder), a bad tag format. (A command that is not there or not executable is reported
  // by the agent, with its exit status: check_command.)
  // `base_env`: the agent's own environment (current_environment()).
  StartupContext(const AgentOptions& o, EnvMap base_env);

  const std::vector<std::string>& command() const { return command_; }
  const std::filesystem::path& workdir() const { return workdir_; }
  const GuardianProgram& guardian_program() const { return guardian_; }
  const std::string& run_id() const { return ctx_.run_id; }
  const std::string& agent_id() const { return ctx_.agent_id; }     // DTRAIN_AGENT_ID
  const std::string& shm_prefix() const { return ctx_.shm_prefix; } // DTRAIN_SHM_PREFIX

  // The store the agent serves itself (embed_store): its address and token, on loopback.
  void use_store(const std::string& addr, const std::string& token);
  // The run folder's plan file (DTRAIN_PLAN) and the workers' checkpoint folder.
  void use_run_folder(const std::string& plan_path, const std::string& checkpoint_dir);
  // An elastic generation's plan: its master address.
  void adopt(const config::Plan& plan);
  // The next generation's number and MASTER_PORT.
  void begin_generation(int generation, int master_port);
  // The environment of the worker of rank `r` in the current generation; `cpus`: its share of the
  // CPUs when bound (OMP_NUM_THREADS follows it).
  EnvMap worker_env(const config::Plan& plan, const config::RankInfo& r, const RankCpus* cpus = nullptr) const;
  // Each local rank's share of the CPUs under the plan's cluster.cpu_bind (cpu_binding.hpp), from
  // this machine as it was when first asked (cpu_topology.hpp).
  CpuBinding cpu_binding(const config::Plan& plan);

  // The Python that runs the command ("" : none), looked up along the PATH the workers get (the
  // spec's, else the agent's) the first time it is asked for.
  const std::string& interpreter(const config::Plan& plan);

 private:
  std::vector<std::string> command_;
  std::filesystem::path workdir_;
  EnvMap base_env_;
  GuardianProgram guardian_;
  EnvContext ctx_;
  std::optional<std::string> interpreter_;
  std::optional<CpuTopology> cpus_;
  std::map<int, int> gpu_nodes_;  // by device minor
};

// The GPU (its index, /dev/nvidiaN) of each of `local` local ranks, -1 when not known; empty when
// the job uses no GPUs. Local rank i uses GPU i of those it sees: with bind_gpus its
// CUDA_VISIBLE_DEVICES is i, else the one it inherits (the spec's env, else the agent's, as Slurm
// sets it) names them, the i-th entry local rank i's (an entry that is no index, a UUID: unknown).
std::vector<int> local_gpus(const config::Plan& plan, const EnvMap& base_env, int local);

// This node's ranks in `plan`.
std::vector<int> local_ranks(const config::Plan& plan);

}  // namespace dtrain::agent
