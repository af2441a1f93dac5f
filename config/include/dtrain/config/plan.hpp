#pragma once
// The plan: node identity + cluster size + rank table + batch math, computed from a JobSpec.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dtrain/config/layout.hpp"
#include "dtrain/config/spec.hpp"

namespace dtrain::config {

// Where each identity field came from: "flags", "spec", "slurm", "sagemaker", "torch-env", "default".
struct NodeIdentity {
  int node_rank = 0;
  int instances = 1;
  std::string master_addr = "127.0.0.1";
  std::optional<int> master_port;          // --master-port, else the MASTER_PORT exported: the workers' exactly
  std::vector<std::string> hosts;          // all node host names when known (Slurm, SageMaker)
  std::string host;                        // this node's name
  std::optional<int> gpus_per_instance;    // SM_NUM_GPUS
  std::optional<std::string> run_id;       // SLURM_JOB_ID
  std::string source = "default";          // summary: the source of node_rank/instances
  std::map<std::string, std::string> field_sources;  // "node_rank" -> "slurm", ...
  std::vector<std::string> warnings;       // sound but probably unintended (SLURM_NTASKS_PER_NODE > 1)
};

// A snapshot of the environment (so tests can pass their own) plus the SageMaker file path.
struct Environment {
  std::map<std::string, std::string> vars;
  std::string sagemaker_resource_file = "/opt/ml/input/config/resourceconfig.json";
  std::string dev_dir = "/dev";  // where /dev/nvidia0.. are counted
  std::string hostname;          // this machine's name ("" when unknown)
  int visible_gpus = 0;          // GPUs this process may use (count_visible_gpus)
  int cpu_slots = 1;             // CPUs this process may run on (CPU worker slots when no count is given)
  // Reads environ and gethostname, and probes the GPUs and CPUs: the planner reads nothing else.
  static Environment current();
  const std::string* get(const std::string& name) const;
};

NodeIdentity discover_identity(const JobSpec& spec, const Overrides& overrides, const Environment& env);

struct RankInfo {
  int rank;
  int node_rank;
  int local_rank;
};

struct BatchPlan {
  std::int64_t global = 0;
  std::int64_t per_replica = 0;
  std::int64_t micro_batches = 1;
  std::int64_t micro_batch_size = 0;
  std::optional<std::int64_t> dataset_size;
  std::int64_t epochs = 1;
  std::optional<std::int64_t> iterations_per_epoch;  // needs dataset_size
  std::optional<std::int64_t> total_iterations;
  // dataset_size that does not divide by global: the last iteration of each epoch has only this many
  // samples (the workers see DTRAIN_DATASET_SIZE and decide: a short last batch, or drop it)
  std::optional<std::int64_t> last_batch;
  std::optional<double> learning_rate;  // batch.learning_rate scaled to this global batch
  std::int64_t warmup_iterations = 0;
};

// The scaled rate of batch.learning_rate at `global` samples per iteration.
double scaled_learning_rate(const LearningRateSpec& lr, std::int64_t global);

// The hosts of -H, --hosts or --hostfile: every node of the job, its node rank its place in the
// list, each running procs_per_instance workers, and the command that reaches them.
struct HostsPlan {
  std::vector<std::string> names;
  std::string from;     // "-H a:4,b:4", "--hostfile hosts.txt"
  int this_host = -1;   // this machine's place among them (by host name, or --node-rank); -1: not one
  std::vector<std::string> launch_agent = {"ssh"};  // --launch-agent, as words: AGENT... HOST COMMAND
};

struct Plan {
  JobSpec spec;
  NodeIdentity identity;
  int world_size = 1;
  int instances = 1;                       // nodes; in an elastic job the max until a join says how many
  int min_instances = 1;                   // elastic (cluster.instances {min, max}, --nnodes MIN:MAX): min;
                                           // otherwise equal to instances
  int procs_per_instance = 1;
  bool use_gpus = false;                   // one worker per GPU
  std::string slots_source;                // "spec", "flags", "gpus", "cpu cores", "sagemaker"
  Layout layout;                           // pipeline x tensor x data = world size
  std::string schedule;                    // pipeline schedule: "gpipe" | "1f1b"
  std::optional<BatchPlan> batch;          // when the spec has a batch section; replicas = layout.data
  std::vector<RankInfo> ranks;             // every rank of the job, ordered by global rank
  std::string run_id;
  std::string run_id_source;               // "spec", "slurm", "generated", "derived"
  // Effective rendezvous endpoint HOST:PORT: the spec/--rdzv one, else derived from the master
  // address for multi-node jobs; "" means a standalone store on this (single) node.
  std::string rdzv_endpoint;
  std::string rdzv_source;                 // "flags", "spec", "slurm", "sagemaker", "torch-env", "standalone"
  std::vector<std::string> warnings;       // sound but probably unintended (shown by plan and launch)
  std::string python;                      // the interpreter of a script or module launch (program.hpp)
  std::string python_source;               // "--python", "PYTHON_EXEC", "python3 from PATH"
  std::string instance_type;               // the GPU instance type the GPUs per instance came from
  std::optional<HostsPlan> hosts;          // -H, --hosts, --hostfile (node ranks in their order)
  // where a launch takes the rendezvous token from: "file", "DTRAIN_RDZV_TOKEN", "launch" (a launch
  // that starts every host makes one of its own when neither is given), "store" (one node: its own
  // store makes one), "" none (never the token)
  std::string token_source;
  // pipeline > 1: the idle fraction of each iteration, (p-1)/(m+p-1) for p stages and m micro-batches
  std::optional<double> pipeline_bubble;

  bool elastic() const { return min_instances < instances; }
};

// A launch of this plan starts `dtrain launch` on every host (the head): hosts of -H or --hostfile
// without --node-rank, other than this machine alone.
bool starts_every_host(const Plan& plan);

// Default port of a rendezvous endpoint derived from the master address (torchrun's).
inline constexpr int kDefaultRdzvPort = 29400;

// Visible GPUs (0 when none or no driver) from env's variables and dev_dir: DTRAIN_TEST_GPUS (for
// tests), else CUDA_VISIBLE_DEVICES over <dev_dir>/nvidia[0-9]*. Environment::current() fills
// visible_gpus with it.
int count_visible_gpus(const Environment& env);
// Throws SpecError on impossible combinations (global batch not dividing world size, ...).
Plan make_plan(const JobSpec& spec, const Overrides& overrides, const Environment& env);
// The plan of a generation of an elastic job that runs on `instances` nodes: world size, rank table,
// layout and batch plan recomputed (a fixed per_replica keeps it, a fixed global batch keeps that);
// min_instances and the rest stay. Throws SpecError when the job cannot run at that size (make_plan
// checks every size from min to max, so that cannot happen to a plan it made).
Plan replan(const Plan& plan, int instances);
// The plan as one JSON object (the `dtrain plan --json` form and the DTRAIN_PLAN file).
std::string plan_to_json(const Plan& plan, int indent = 2);
// The human-readable summary and rank table of `dtrain plan`.
std::string plan_to_text(const Plan& plan);

}  // namespace dtrain::config
