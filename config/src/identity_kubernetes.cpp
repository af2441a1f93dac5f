// Node identity on Kubernetes: the torch env that Kubeflow's PyTorchJob sets in each pod (MASTER_ADDR,
// MASTER_PORT, WORLD_SIZE, RANK; PET_NNODES), and a Kubernetes indexed Job or JobSet
// (JOB_COMPLETION_INDEX, the pods' host names $(job-name)-$(index) under a headless service).
#include <netdb.h>
#include <sys/socket.h>

#include <string>

#include <fmt/format.h>

#include "identity_internal.hpp"

namespace dtrain::config::detail {

namespace {

// PET_NNODES "N" or "MIN:MAX" (torchrun's --nnodes): the node count, the range's max. A bad value is
// left to the PET_* flags, which report it.
std::optional<int> pet_nnodes_count(const std::string& text) {
  auto colon = text.find(':');
  auto n = to_int(colon == std::string::npos ? text : text.substr(colon + 1));
  if (!n || *n < 1 || *n > 65536) return std::nullopt;
  return static_cast<int>(*n);
}

// MASTER_ADDR, WORLD_SIZE and RANK at node level, as a PyTorchJob sets them in each pod (one
// launcher per pod). Since training-operator 1.8 WORLD_SIZE counts processes (replicas x
// nprocPerNode) and PET_NNODES the pods, so with PET_NNODES set, PET_NNODES is the node count.
std::optional<EnvIdentity> from_torch_env(const Environment& env, Problems& out) {
  const std::string* addr = env.get("MASTER_ADDR");
  const std::string* pet_nnodes = env.get("PET_NNODES");
  bool rank_and_size = env.get("RANK") != nullptr && (env.get("WORLD_SIZE") != nullptr || pet_nnodes != nullptr);
  if (addr == nullptr && !rank_and_size) return std::nullopt;
  EnvIdentity id;
  id.source = "torch-env";
  if (addr != nullptr && !addr->empty()) id.master = *addr;
  if (pet_nnodes != nullptr) {
    if (auto n = pet_nnodes_count(*pet_nnodes))
      id.instances = Sourced{*n, "torch-env", "PET_NNODES", *n == to_int(*pet_nnodes) ? "" : *pet_nnodes};
  } else if (auto n = env_int(env, "WORLD_SIZE", "torch env: the number of nodes", 1, 65536, out)) {
    id.instances = Sourced{*n, "torch-env", "WORLD_SIZE"};
  }
  if (auto r = env_int(env, "RANK", "torch env: this node's rank", 0, 65535, out))
    id.node_rank = Sourced{*r, "torch-env", "RANK"};
  return id;
}

// ".svc.ns.svc.cluster.local" when the canonical name of `name` is name.svc.ns...: the kubelet writes
// a pod's fully qualified name (hostname.subdomain.namespace.svc.cluster-domain) first on its line in
// /etc/hosts when the pod has a subdomain; "" otherwise.
std::string dns_domain(const std::string& name) {
  addrinfo hints{};
  hints.ai_flags = AI_CANONNAME;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(name.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) return "";
  std::string canon = res->ai_canonname != nullptr ? res->ai_canonname : "";
  ::freeaddrinfo(res);
  if (canon.size() > name.size() + 1 && canon.compare(0, name.size(), name) == 0 && canon[name.size()] == '.')
    return canon.substr(name.size());
  return "";
}

// Index 0's host name from this pod's: $(job-name)-$(index)[.domain] -> $(job-name)-0[.domain].
std::string indexed_job_master(const Environment& env, int index, Problems& out) {
  std::string name = env.hostname;
  std::string domain;
  if (auto dot = name.find('.'); dot != std::string::npos) {  // setHostnameAsFQDN
    domain = name.substr(dot);
    name.resize(dot);
  }
  std::string suffix = "-" + std::to_string(index);
  if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    out.push_back({"JOB_COMPLETION_INDEX",
                   fmt::format("{} (kubernetes), but this host's name \"{}\" does not end in \"{}\" as the pods of an "
                               "indexed Job do ($(job-name)-$(index)), so index 0's host name is unknown; set "
                               "MASTER_ADDR to it (JOB-0.SERVICE, with the Job's headless service as the pods' "
                               "subdomain)", index, env.hostname, suffix)});
    return "";
  }
  if (domain.empty()) domain = dns_domain(name);
  return name.substr(0, name.size() - suffix.size()) + "-0" + domain;
}

// JOB_COMPLETION_INDEX is this node's rank (RANK, when set too, must agree); the master is
// MASTER_ADDR when set, else index 0's host name. The node count is not in a pod's env, except
// where a Kubeflow TrainJob (a JobSet) sets PET_NNODES.
void apply_indexed_job(std::optional<EnvIdentity>& e, const Environment& env, Problems& out) {
  if (env.get("JOB_COMPLETION_INDEX") == nullptr) return;
  auto index = env_int(env, "JOB_COMPLETION_INDEX", "kubernetes: this pod's completion index", 0, 65535, out);
  if (!index) return;
  if (!e) {
    e.emplace();
    e->source = "kubernetes";
  }
  if (e->node_rank && e->node_rank->value != *index) {
    out.push_back({"JOB_COMPLETION_INDEX", fmt::format("{} (kubernetes) disagrees with {}; drop one or make them agree",
                                                       *index, e->node_rank->label())});
    e->rank_reported = true;
    return;
  }
  const std::string* job_index = env.get("JOB_INDEX");
  if (job_index != nullptr && *job_index != "0" && !e->node_rank) {
    out.push_back({"JOB_INDEX", fmt::format("{} (JobSet): this pod is in job {} of a replicated job, and dtrain numbers "
                                            "the nodes of one indexed Job by JOB_COMPLETION_INDEX; run the replicated "
                                            "job with replicas: 1 and parallelism = completions = the node count, or "
                                            "set RANK to this node's rank", *job_index, *job_index)});
    e->rank_reported = true;
    return;
  }
  e->node_rank = Sourced{*index, "kubernetes", "JOB_COMPLETION_INDEX"};
  bool torch_env = e->source == "torch-env";  // it has read WORLD_SIZE and PET_NNODES already
  if (const std::string* n = env.get("PET_NNODES"); n != nullptr && !torch_env) {  // a Kubeflow TrainJob's
    if (auto count = pet_nnodes_count(*n)) e->instances = Sourced{*count, "kubernetes", "PET_NNODES"};
  } else if (!torch_env) {  // the manifest's own
    if (auto count = env_int(env, "WORLD_SIZE", "kubernetes: the number of nodes", 1, 65536, out))
      e->instances = Sourced{*count, "kubernetes", "WORLD_SIZE"};
  }
  e->needs_count = !e->instances;
  if (e->master.empty()) e->master = indexed_job_master(env, *index, out);
}

}  // namespace

std::optional<EnvIdentity> from_kubernetes(const Environment& env, Problems& out) {
  // A worker's RANK/WORLD_SIZE count processes, and it inherits the pod's JOB_COMPLETION_INDEX.
  if (is_worker_env(env)) return std::nullopt;
  std::optional<EnvIdentity> e = from_torch_env(env, out);
  apply_indexed_job(e, env, out);
  return e;
}

bool check_indexed_job_count(const std::optional<EnvIdentity>& e, const Sourced& instances, Problems& out) {
  if (!e || !e->needs_count || !e->node_rank || instances.source != "default") return false;
  out.push_back({"JOB_COMPLETION_INDEX",
                 fmt::format("{} (kubernetes) is this node's rank, but nothing gives the node count (an indexed Job's "
                             "completions is not in its pods' env): set cluster.instances in the job spec (or "
                             "--nnodes, PET_NNODES or WORLD_SIZE) to the Job's completions; --standalone runs a "
                             "one-node job in each pod instead", e->node_rank->value)});
  return true;
}

}  // namespace dtrain::config::detail
