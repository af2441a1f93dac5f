#pragma once
// The worker environment contract (dtrain-launch(1), ENVIRONMENT): what every worker gets.
#include <map>
#include <string>
#include <vector>

#include "dtrain/config/plan.hpp"

namespace dtrain::agent {

using EnvMap = std::map<std::string, std::string>;

struct EnvContext {
  int generation = 0;          // restart count
  std::string run_id;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  std::string store_addr;      // "" : DTRAIN_STORE_* left out
  std::string store_token;
  EnvMap store_env;            // the etcd backend's DTRAIN_ETCD_* (with DTRAIN_STORE_ADDR etcd://HOST:PORT)
  std::string local_addr = "127.0.0.1";
  std::string plan_path;       // DTRAIN_PLAN
  std::string checkpoint_dir;  // DTRAIN_CHECKPOINT_DIR (absolute); "" : left out
  int cores = 1;               // CPUs this agent may use (OMP_NUM_THREADS default)
  std::string agent_id;        // DTRAIN_AGENT_ID: what the guardian finds every descendant by
  std::string shm_prefix;      // DTRAIN_SHM_PREFIX: the stem of the workers' /dev/shm segments
  std::string role = "default";  // ROLE_NAME
};

// base (the agent's environment) < spec `env` < the contract variables; OMP_NUM_THREADS is set only
// when neither base nor spec env has it: to `threads` (a bound rank's share of the CPUs), or when
// that is 0 to max(1, cores / local workers).
EnvMap worker_env(const config::Plan& plan, const config::RankInfo& rank, const EnvContext& ctx,
                  const EnvMap& base, int threads = 0);

// The agent's own environment.
EnvMap current_environment();

}  // namespace dtrain::agent
