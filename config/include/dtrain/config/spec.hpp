#pragma once
// Job spec v1 (DESIGN section 2, man/dtrain-job.5): the typed form of job.json after validation.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dtrain/config/errors.hpp"
#include "dtrain/config/hosts.hpp"

namespace dtrain::config {

struct ClusterSpec {
  std::optional<int> instances;          // unset: from Slurm/SageMaker/torch env, else 1; elastic: the max
  std::optional<int> min_instances;      // elastic ({"min": A, "max": B}): A; unset: a fixed node count
  std::optional<int> gpus_per_instance;  // unset or "auto": visible GPUs, else procs_per_instance
  bool gpus_auto = true;                 // "auto" (or unset)
  std::optional<int> procs_per_instance; // CPU spelling of the same field; unset: one per core
  bool bind_gpus = false;                // set CUDA_VISIBLE_DEVICES to one GPU per worker
  std::string cpu_bind = "none";         // "none" | "core" | "numa": each local rank's share of the CPUs
  std::optional<std::string> instance_type;  // "ml.p3.8xlarge", "p4d.24xlarge": GPUs per instance from a table
};

// batch.learning_rate: the rate the plan computes for the job's global batch (and recomputes when
// an elastic job's global batch changes).
struct LearningRateSpec {
  double base = 0;                                       // the rate at reference_global_batch
  std::optional<std::int64_t> reference_global_batch;    // the global batch `base` was tuned at
  std::string scaling = "linear";                        // "linear" | "sqrt" | "none"
  std::int64_t warmup_iterations = 0;                    // iterations to ramp up to the rate
};

struct BatchSpec {
  std::optional<std::int64_t> per_replica;
  std::optional<std::int64_t> global;
  std::int64_t micro_batches = 1;
  std::optional<std::int64_t> dataset_size;
  std::int64_t epochs = 1;
  std::optional<LearningRateSpec> learning_rate;
};

// Model parallelism (dtrain-job(5), parallel): pipeline stages x tensor shards x data replicas.
struct ParallelSpec {
  int pipeline = 1;
  int tensor = 1;
  std::optional<int> data;            // unset: world size / (pipeline x tensor)
  std::string order = "tp-dp-pp";     // rank layout, fastest-varying first (Megatron-LM's)
  std::string schedule = "1f1b";      // "gpipe" | "1f1b"
};

// The etcd backend's TLS and authentication, passed through to etcd (and to the workers' store).
struct EtcdSpec {
  std::optional<std::string> cacert;         // https: CA bundle that signed etcd's certificate
  std::optional<std::string> cert, key;      // https: this node's client certificate and its key
  std::optional<std::string> user;           // etcd authentication (with password_file)
  std::optional<std::string> password_file;  // file holding the user's password
  bool tls() const { return cacert || cert || key; }
};

struct RendezvousSpec {
  std::string backend = "builtin";      // "builtin" (dtrain's store) or "etcd" (an etcd v3 cluster at endpoint)
  EtcdSpec etcd;
  std::optional<std::string> endpoint;  // HOST:PORT; unset: standalone store on this node
  double join_timeout_s = 600;
  double heartbeat_s = 5;
  std::optional<double> heartbeat_timeout_s;  // unset: 3 x heartbeat_s
  std::optional<std::string> token_file;
  std::optional<std::string> run_id;  // unset: SLURM_JOB_ID, else generated
  double last_call_s = 30;            // elastic: the barrier closes this long after min nodes joined
};

struct RestartSpec {
  int max_restarts = 0;
  double backoff_s = 0;  // wait before each restart
  std::optional<std::string> checkpoint_dir;  // DTRAIN_CHECKPOINT_DIR; relative to workdir; unset: a folder of the launch (run_folder.hpp)
};

struct OutputSpec {
  bool tag = true;
  std::string tag_format = "[{node}/{rank}] ";  // fields: {node} {rank} {local_rank} {stream}
  bool timestamps = false;
  std::optional<std::string> log_dir;
  std::optional<double> hang_timeout_s;  // a collective waited this long: the job hangs (exit 70)
  double straggler_share = 0.2;          // warn when one rank keeps the others waiting this share of the time (0: never)
};

struct JobSpec {
  int version = 1;
  std::string name;  // default: basename of command[0]
  std::vector<std::string> command;
  std::string workdir = ".";
  ClusterSpec cluster;
  BatchSpec batch;
  bool has_batch = false;
  ParallelSpec parallel;
  RendezvousSpec rendezvous;
  RestartSpec restart;
  std::map<std::string, std::string> env;
  OutputSpec output;
  double grace_s = 10;                     // SIGTERM -> SIGKILL grace when stopping workers
  std::optional<double> max_runtime_s;     // kill the job after this long
  std::filesystem::path source;            // file the spec came from ("" for the embedded default)
};

// A spec field set by a flag (--log-dir, --max-restarts, --rdzv-conf timeout=60, ...) through its
// row in flags.hpp: applied as --set applies its value, before validation, checked by the field's
// rule and named by its flag in messages.
struct FlagSet {
  std::string pointer;  // "/output/log_dir"
  std::string value;    // JSON text
  std::string flag;     // "--log-dir", "--rdzv-conf timeout"
  std::string origin;   // "" the command line; "PET_LOG_DIR=logs" torchrun's variable
};

// What a launch gives the spec and the plan besides the job file (launch.hpp resolves it from the
// command line): spec fields set by flags, and the launch settings the plan reads. Each value was
// checked once, by its target's rule, when it was set.
struct Overrides {
  std::vector<std::string> sets;           // --set "/json/pointer=value" (value parsed as JSON, else string)
  std::vector<FlagSet> flag_sets;          // spec fields set by flags (applied after sets)
  std::optional<int> node_rank;            // --node-rank
  std::optional<int> nproc_per_node;       // --nproc-per-node N
  std::optional<std::string> nproc_mode;   // --nproc-per-node gpu | cpu | auto
  bool standalone = false;                 // --standalone: one node, a store of its own
  std::optional<std::string> master_addr;  // --master-addr
  std::optional<int> master_port;          // --master-port: the workers' MASTER_PORT
  std::optional<int> total_ranks;          // mpirun's -n/-np: the world size
  std::vector<HostSlots> hosts;            // -H/--hosts, --hostfile: every node, node ranks in order
  std::string hosts_from;                  // how they were given: "-H a:4,b:4", "--hostfile hosts.txt"
  std::vector<std::string> launch_agent;   // --launch-agent "ssh -F cfg" as words; empty: ssh
  std::optional<std::vector<std::string>> command;  // replaces the spec's command (program.hpp)
  std::optional<std::string> default_name;          // the job name when the spec has none
  // Workers per node when neither a flag nor the spec says: torchrun's default (1) for a launch
  // without a job file; unset: visible GPUs, else CPUs (the job spec's "auto").
  std::optional<int> default_nproc_per_node;

  // The flag that set spec field `pointer` ("--nnodes"), or nullptr when no flag did.
  const FlagSet* flag_for(std::string_view pointer) const;
};

// Parses and validates a spec; on any problem throws SpecError listing every problem found.
JobSpec load_spec_file(const std::filesystem::path& file, const Overrides& overrides);
JobSpec load_spec_text(const std::string& json_text, const Overrides& overrides,
                       const std::filesystem::path& source = {});
// The spec of a launch without a job file: overrides.command is its command, the rest defaults.
JobSpec command_spec(const Overrides& overrides);
// The embedded default job used by `dtrain launch` without a file (the README demo).
JobSpec default_spec(const Overrides& overrides);
// The same, with its worker (dtrain-demo-worker) looked up next to dtrain_exe, then in
// dtrain_exe/../libexec/dtrain/; ConfigError naming both places when it is in neither.
JobSpec default_spec(const Overrides& overrides, const std::filesystem::path& dtrain_exe);

}  // namespace dtrain::config
