#include "dtrain/common/worker_env.hpp"

#include <algorithm>
#include <array>

namespace dtrain::worker_env {
namespace {

constexpr std::array kVars = {
    // torchrun's contract
    Var{"RANK", true}, Var{"LOCAL_RANK", true}, Var{"WORLD_SIZE", true}, Var{"LOCAL_WORLD_SIZE", true},
    Var{"GROUP_RANK", true}, Var{"GROUP_WORLD_SIZE", true}, Var{"ROLE_NAME", true}, Var{"ROLE_RANK", true},
    Var{"ROLE_WORLD_SIZE", true}, Var{"MASTER_ADDR", true}, Var{"MASTER_PORT", true},
    Var{"TORCHELASTIC_RESTART_COUNT", true}, Var{"TORCHELASTIC_MAX_RESTARTS", true},
    Var{"TORCHELASTIC_RUN_ID", true}, Var{"TORCHELASTIC_USE_AGENT_STORE", true}, Var{"TORCHELASTIC_ERROR_FILE", true},
    // dtrain's own
    Var{"DTRAIN_RUN_ID", true}, Var{"DTRAIN_GENERATION", true}, Var{"DTRAIN_NODE_RANK", true},
    Var{"DTRAIN_NNODES", true}, Var{"DTRAIN_WORLD_SIZE", true}, Var{"DTRAIN_STORE_ADDR", true},
    Var{"DTRAIN_STORE_TOKEN", true}, Var{"DTRAIN_LOCAL_ADDR", true}, Var{"DTRAIN_GLOBAL_BATCH", true},
    Var{"DTRAIN_PER_REPLICA_BATCH", true}, Var{"DTRAIN_MICRO_BATCHES", true},
    Var{"DTRAIN_MICRO_BATCH_SIZE", true}, Var{"DTRAIN_EPOCHS", true}, Var{"DTRAIN_DATASET_SIZE", true},
    Var{"DTRAIN_ITERATIONS_PER_EPOCH", true}, Var{"DTRAIN_TOTAL_ITERATIONS", true}, Var{"DTRAIN_PLAN", true},
    Var{"DTRAIN_LEARNING_RATE", true}, Var{"DTRAIN_WARMUP_ITERATIONS", true},
    Var{"DTRAIN_DP_RANK", true}, Var{"DTRAIN_DP_SIZE", true}, Var{"DTRAIN_PP_RANK", true}, Var{"DTRAIN_PP_SIZE", true},
    Var{"DTRAIN_TP_RANK", true}, Var{"DTRAIN_TP_SIZE", true}, Var{"DTRAIN_PARALLEL_ORDER", true},
    Var{"DTRAIN_PP_SCHEDULE", true}, Var{"DTRAIN_AGENT_ID", true}, Var{"DTRAIN_PROGRESS_FILE", true},
    Var{"DTRAIN_SHM_PREFIX", true}, Var{"DTRAIN_CHECKPOINT_DIR", true},
    // the etcd backend's store (rendezvous.backend "etcd")
    Var{"DTRAIN_ETCD_CACERT", true}, Var{"DTRAIN_ETCD_CERT", true}, Var{"DTRAIN_ETCD_KEY", true},
    Var{"DTRAIN_ETCD_USER", true}, Var{"DTRAIN_ETCD_PASSWORD_FILE", true},
    // defaults
    Var{"CUDA_VISIBLE_DEVICES", false}, Var{"OMP_NUM_THREADS", false},
};

}  // namespace

std::span<const Var> variables() { return kVars; }

const Var* find(std::string_view name) {
  auto it = std::find_if(kVars.begin(), kVars.end(), [&](const Var& v) { return v.name == name; });
  return it == kVars.end() ? nullptr : &*it;
}

}  // namespace dtrain::worker_env
