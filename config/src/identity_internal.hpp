#pragma once
// Node identity's parts shared by identity.cpp (flags, spec, SageMaker, Slurm) and
// identity_kubernetes.cpp (the torch env of Kubeflow's PyTorchJob, and Kubernetes indexed Jobs).
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dtrain/config/errors.hpp"
#include "dtrain/config/plan.hpp"

namespace dtrain::config::detail {

using Problems = std::vector<SpecProblem>;

// discover_identity without throwing: problems are appended so make_plan reports them together
// with its own.
NodeIdentity discover_identity(const JobSpec& spec, const Overrides& overrides, const Environment& env,
                               Problems& problems);

// One value with where it came from, for messages: "SLURM_NODEID=1 (slurm)".
struct Sourced {
  int value = 0;
  std::string source;  // "flags", "spec", "slurm", ...
  std::string path;    // "--nnodes", "/cluster/instances", "SLURM_NNODES"
  std::string shown;   // the variable's own text when the value is derived from it (a host list)
  Sourced(int v, std::string src, std::string p, std::string text = {})
      : value(v), source(std::move(src)), path(std::move(p)), shown(std::move(text)) {}
  std::string label() const;
};

// What one environment (a scheduler, the torch env, Kubernetes) says about this node.
struct EnvIdentity {
  std::string source;
  bool scheduler = false;  // Slurm/SageMaker: the allocation is the truth; flags may restate it only
  std::optional<Sourced> node_rank;
  std::optional<Sourced> instances;
  std::string master;
  std::vector<std::string> hosts;
  std::string host;
  std::optional<int> gpus;
  std::optional<std::string> run_id;
  bool rank_reported = false;  // this node's rank is unknown and a problem already says why
  bool needs_count = false;    // the node count must come from elsewhere (an indexed Job has none)
  std::vector<std::string> warnings;
};

std::optional<long long> to_int(const std::string& s);
// The integer variable `name` in [lo, hi], or nullopt (unset, or a problem when it is not one).
std::optional<int> env_int(const Environment& env, const std::string& name, const std::string& source, long long lo,
                           long long hi, Problems& out);
// A dtrain (or torchrun) worker's own env: its RANK/WORLD_SIZE count processes, not nodes.
bool is_worker_env(const Environment& env);

// The torch env (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK at node level, as Kubeflow's PyTorchJob
// sets it, PET_NNODES included) and a Kubernetes indexed Job (JOB_COMPLETION_INDEX, the pods'
// host names), merged: nullopt when neither is there.
std::optional<EnvIdentity> from_kubernetes(const Environment& env, Problems& out);
// mpirun's counts (counts.cpp). The workers per node the command line or the spec gives (-H's
// slots, --nproc-per-node or -ppn, the spec's count), with their name for messages.
std::optional<std::pair<int, std::string>> given_per_node(const JobSpec& spec, const Overrides& ov);
// Before the identity: one slot count for every host of -H (into ov.nproc_per_node), and -n's
// contradictions with the node and worker counts given.
void check_counts(const JobSpec& spec, Overrides& ov, Problems& out);
// -n with a per-node count and no node count: the node count it makes, a flag's.
std::optional<Sourced> nodes_of_total(const JobSpec& spec, const Overrides& ov);
// After the identity: -n over the nodes when no per-node count is given (into ov.nproc_per_node).
void per_node_of_total(const Plan& plan, Overrides& ov, Problems& out);

// A problem when an indexed Job's node count came from nowhere (true when reported).
bool check_indexed_job_count(const std::optional<EnvIdentity>& e, const Sourced& instances, Problems& out);

}  // namespace dtrain::config::detail
