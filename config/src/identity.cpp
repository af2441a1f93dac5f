// Node identity: who am I and who are the others, field by field from
// flags > job spec > environment (SageMaker, Slurm, torch/Kubernetes env: identity_kubernetes.cpp) >
// defaults.
#include <algorithm>
#include <charconv>
#include <system_error>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/net.hpp"
#include "dtrain/common/text.hpp"
#include "dtrain/config/hostlist.hpp"
#include "dtrain/config/plan.hpp"
#include "identity_internal.hpp"

namespace dtrain::config {
namespace detail {

std::string Sourced::label() const {
  if (source == "default") return fmt::format("default {}", value);
  if (source == "hosts")  // path: "-H a:4,b:4"; shown: this host's name
    return shown.empty() ? fmt::format("{} ({} nodes)", path, value)
                         : fmt::format("host {} = node {} of {}", shown, value, path);
  if (path.rfind("-", 0) == 0 && !shown.empty()) return fmt::format("{} {} ({} nodes, flags)", path, shown, value);
  if (path.rfind("--", 0) == 0) return fmt::format("{} {} (flags)", path, value);
  if (path.rfind('/', 0) == 0) return fmt::format("{} {} (job spec)", path, value);
  if (!shown.empty()) return fmt::format("{}={} ({} hosts, {})", path, shown, value, source);
  return fmt::format("{}={} ({})", path, value, source);
}

std::optional<long long> to_int(const std::string& s) {
  long long v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc{} || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<int> env_int(const Environment& env, const std::string& name, const std::string& source, long long lo,
                           long long hi, Problems& out) {
  const std::string* v = env.get(name);
  if (v == nullptr) return std::nullopt;
  auto x = to_int(*v);
  if (!x || *x < lo || *x > hi) {
    out.push_back({name, fmt::format("\"{}\" ({}) is not an integer from {} to {}", *v, source, lo, hi)});
    return std::nullopt;
  }
  return static_cast<int>(*x);
}

// A worker of dtrain (or torchrun) carries LOCAL_RANK/DTRAIN_RUN_ID.
bool is_worker_env(const Environment& env) {
  return env.get("LOCAL_RANK") != nullptr || env.get("DTRAIN_RUN_ID") != nullptr;
}

}  // namespace detail

namespace {

using json = nlohmann::json;
using detail::EnvIdentity;
using detail::Problems;
using detail::Sourced;
using detail::env_int;

void hosts_identity(EnvIdentity& id, const std::string& current, const std::string& current_var,
                    const std::string& hosts_what, Problems& out) {
  auto it = std::find(id.hosts.begin(), id.hosts.end(), current);
  if (it == id.hosts.end()) {
    std::string shown = text::join(std::span<const std::string>(id.hosts.data(), std::min<std::size_t>(id.hosts.size(), 8)), ", ");
    if (id.hosts.size() > 8) shown += ", ...";
    out.push_back({current_var, fmt::format("host \"{}\" ({}) is not in {} [{}]; this node's rank is its place in "
                                            "that list", current, id.source, hosts_what, shown)});
    id.rank_reported = true;
    return;
  }
  id.host = current;
  id.node_rank = Sourced{static_cast<int>(it - id.hosts.begin()), id.source, current_var};
}

std::optional<EnvIdentity> from_sagemaker(const Environment& env, Problems& out) {
  EnvIdentity id;
  id.source = "sagemaker";
  id.scheduler = true;
  json cfg;
  std::string what;
  if (const std::string* rc = env.get("SM_RESOURCE_CONFIG"); rc != nullptr && !rc->empty()) {
    what = "SM_RESOURCE_CONFIG";
    try {
      cfg = json::parse(*rc);
    } catch (const json::exception& e) {
      out.push_back({what, fmt::format("is not valid JSON ({}); expected {{\"current_host\": ..., \"hosts\": [...]}}",
                                       e.what())});
      return std::nullopt;
    }
  } else if (std::error_code ec; std::filesystem::is_regular_file(env.sagemaker_resource_file, ec)) {
    what = env.sagemaker_resource_file;
    std::ifstream in(env.sagemaker_resource_file);
    std::stringstream ss;
    ss << in.rdbuf();
    try {
      cfg = json::parse(ss.str());
    } catch (const json::exception& e) {
      out.push_back({what, fmt::format("is not valid JSON ({})", e.what())});
      return std::nullopt;
    }
  } else if (env.get("SM_HOSTS") != nullptr || env.get("SM_CURRENT_HOST") != nullptr) {
    const std::string* hosts = env.get("SM_HOSTS");
    const std::string* cur = env.get("SM_CURRENT_HOST");
    if (hosts == nullptr || cur == nullptr) {
      out.push_back({hosts == nullptr ? "SM_HOSTS" : "SM_CURRENT_HOST",
                     fmt::format("is not set while {} is (sagemaker); set both or neither",
                                 hosts == nullptr ? "SM_CURRENT_HOST" : "SM_HOSTS")});
      return std::nullopt;
    }
    what = "SM_HOSTS";
    try {
      cfg["hosts"] = json::parse(*hosts);
    } catch (const json::exception&) {
      out.push_back({"SM_HOSTS", fmt::format("\"{}\" is not a JSON list of host names, e.g. [\"algo-1\",\"algo-2\"]", *hosts)});
      return std::nullopt;
    }
    cfg["current_host"] = *cur;
  } else {
    return std::nullopt;
  }
  if (!cfg.is_object() || !cfg.contains("hosts") || !cfg["hosts"].is_array() || cfg["hosts"].empty() ||
      !std::all_of(cfg["hosts"].begin(), cfg["hosts"].end(), [](const json& h) { return h.is_string(); }) ||
      !cfg.contains("current_host") || !cfg["current_host"].is_string()) {
    out.push_back({what, "expected \"hosts\" (a non-empty list of host names) and \"current_host\" (a string) (sagemaker)"});
    return std::nullopt;
  }
  id.hosts = cfg["hosts"].get<std::vector<std::string>>();
  std::sort(id.hosts.begin(), id.hosts.end());
  if (auto twice = std::adjacent_find(id.hosts.begin(), id.hosts.end()); twice != id.hosts.end()) {
    out.push_back({what == "SM_HOSTS" ? "SM_HOSTS" : what + " hosts",
                   fmt::format("names host \"{}\" twice (sagemaker); each instance is one node, so the node count "
                               "and ranks cannot be known: fix the resource configuration", *twice)});
    return std::nullopt;
  }
  id.instances = Sourced{static_cast<int>(id.hosts.size()), "sagemaker", what == "SM_HOSTS" ? "SM_HOSTS" : what + " hosts",
                         what == "SM_HOSTS" ? *env.get("SM_HOSTS") : ""};
  id.master = id.hosts.front();
  hosts_identity(id, cfg["current_host"].get<std::string>(), what == "SM_HOSTS" ? "SM_CURRENT_HOST" : what + " current_host",
                 what, out);
  id.gpus = env_int(env, "SM_NUM_GPUS", "sagemaker", 0, 4096, out);
  return id;
}

// -H/--hosts/--hostfile: the nodes are the hosts named, node 0 the first; this machine's rank is its
// host name's place among them ("a" matches a.example.com too). A machine that is not one of them
// has no rank of its own (the plan says so; see HostsPlan).
std::optional<EnvIdentity> from_hosts(const Overrides& ov, const Environment& env) {
  if (ov.hosts.empty()) return std::nullopt;
  EnvIdentity id;
  id.source = "hosts";
  id.scheduler = true;  // flags and the spec may restate the node count, not contradict it
  for (const auto& h : ov.hosts) id.hosts.push_back(h.name);
  id.instances = Sourced{static_cast<int>(id.hosts.size()), "hosts", ov.hosts_from};
  id.master = id.hosts.front();
  auto first_label = [](const std::string& s) { return s.substr(0, s.find('.')); };
  for (std::size_t i = 0; i < id.hosts.size() && !env.hostname.empty(); ++i) {
    const std::string& h = id.hosts[i];
    if (h == env.hostname || h == first_label(env.hostname) || first_label(h) == env.hostname) {
      id.node_rank = Sourced{static_cast<int>(i), "hosts", ov.hosts_from, h};
      id.host = h;
      break;
    }
  }
  return id;
}

// Slurm variables of a node's identity without the node list: refused, not ignored (the job would
// otherwise run as a single node where the user expected several).
void check_partial_slurm(const Environment& env, Problems& out) {
  for (const char* v : {"SLURM_NODEID", "SLURM_NNODES", "SLURMD_NODENAME"}) {
    const std::string* x = env.get(v);
    if (x == nullptr) continue;
    out.push_back({v, fmt::format("{}={} is set but SLURM_JOB_NODELIST is not (slurm): a partial Slurm environment, "
                                  "so the nodes of the allocation are unknown; run dtrain inside the allocation "
                                  "(sbatch, salloc, srun), or unset the SLURM_* variables", v, *x)});
    return;
  }
}

// dtrain runs once per node and starts the workers itself: several Slurm tasks per node are several
// dtrains per node. A second task of a node is refused; the count alone is a warning.
void check_tasks_per_node(const Environment& env, EnvIdentity& id, Problems& out) {
  const std::string* t = env.get("SLURM_NTASKS_PER_NODE");
  int n = 0;
  if (t == nullptr || std::from_chars(t->data(), t->data() + t->size(), n).ec != std::errc{} || n <= 1) return;
  const std::string* local = env.get("SLURM_LOCALID");
  if (local != nullptr && *local != "0") {
    out.push_back({"SLURM_LOCALID", fmt::format("{} (slurm): this is task {} of SLURM_NTASKS_PER_NODE={} on this node, "
                                                "but dtrain runs once per node and starts the {} workers itself; "
                                                "use srun --ntasks-per-node=1 and --nproc-per-node {}",
                                                *local, *local, *t, *t, *t)});
    return;
  }
  id.warnings.push_back(fmt::format("SLURM_NTASKS_PER_NODE={} (slurm): dtrain runs once per node and starts the "
                                    "workers itself; run it with srun --ntasks-per-node=1, and give --nproc-per-node "
                                    "{} for {} workers per node", *t, *t, *t));
}

std::optional<EnvIdentity> from_slurm(const Environment& env, Problems& out) {
  std::string list_var = "SLURM_JOB_NODELIST";
  const std::string* list = env.get(list_var);
  if (list == nullptr) {
    list_var = "SLURM_NODELIST";
    list = env.get(list_var);
  }
  if (list == nullptr) {
    check_partial_slurm(env, out);
    return std::nullopt;
  }
  EnvIdentity id;
  id.source = "slurm";
  id.scheduler = true;
  try {
    id.hosts = expand_hostlist(*list);
  } catch (const ConfigError& e) {
    out.push_back({list_var, fmt::format("{} (slurm)", e.what())});
    return std::nullopt;
  }
  id.master = id.hosts.front();
  id.instances = Sourced{static_cast<int>(id.hosts.size()), "slurm", list_var, *list};
  if (auto n = env_int(env, "SLURM_NNODES", "slurm", 1, 1 << 20, out); n && *n != id.instances->value)
    out.push_back({"SLURM_NNODES", fmt::format("{} (slurm) disagrees with the {} hosts of {}={}", *n,
                                               id.instances->value, list_var, *list)});
  auto nodeid = env_int(env, "SLURM_NODEID", "slurm", 0, 1 << 20, out);
  if (nodeid) {
    id.node_rank = Sourced{*nodeid, "slurm", "SLURM_NODEID"};
    if (*nodeid < static_cast<int>(id.hosts.size())) id.host = id.hosts[static_cast<std::size_t>(*nodeid)];
  }
  if (const std::string* name = env.get("SLURMD_NODENAME"); name != nullptr) {
    auto it = std::find(id.hosts.begin(), id.hosts.end(), *name);
    if (it == id.hosts.end()) {
      out.push_back({"SLURMD_NODENAME", fmt::format("host \"{}\" (slurm) is not in {}={}", *name, list_var, *list)});
      id.rank_reported = true;
    } else {
      int index = static_cast<int>(it - id.hosts.begin());
      if (nodeid && *nodeid != index)
        out.push_back({"SLURM_NODEID", fmt::format("{} (slurm) disagrees with SLURMD_NODENAME={}, which is host {} of {}",
                                                   *nodeid, *name, index, list_var)});
      if (!nodeid) id.node_rank = Sourced{index, "slurm", "SLURMD_NODENAME"};
      id.host = *name;
    }
  } else if (!nodeid) {
    auto it = std::find(id.hosts.begin(), id.hosts.end(), env.hostname);
    if (it != id.hosts.end()) {
      id.node_rank = Sourced{static_cast<int>(it - id.hosts.begin()), "slurm", list_var};
      id.host = env.hostname;
    }
  }
  if (const std::string* job = env.get("SLURM_JOB_ID"); job != nullptr && !job->empty()) {
    std::string rid = "slurm-";
    for (char c : *job) rid += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
    id.run_id = rid;
  }
  check_tasks_per_node(env, id, out);
  return id;
}

// MASTER_PORT the user exported (not inside a worker, whose MASTER_PORT is its own job's): it
// reaches the workers exactly.
std::optional<int> exported_master_port(const Environment& env, Problems& out) {
  if (detail::is_worker_env(env)) return std::nullopt;
  return env_int(env, "MASTER_PORT", "the port of rank 0's store for the workers", 1, 65535, out);
}

Sourced choose_instances(const JobSpec& spec, const Overrides& ov, const std::optional<EnvIdentity>& e, Problems& out) {
  Sourced instances{1, "default", ""};
  if (const FlagSet* f = ov.flag_for("/cluster/instances"); f != nullptr && spec.cluster.instances)
    instances = {*spec.cluster.instances, "flags", f->flag};
  else if (spec.cluster.instances) instances = {*spec.cluster.instances, "spec", "/cluster/instances"};
  else if (auto n = detail::nodes_of_total(spec, ov)) instances = *n;
  else if (e && e->instances) instances = *e->instances;
  if (e && e->scheduler && e->instances && instances.source != e->source && instances.value != e->instances->value)
    out.push_back({instances.path, fmt::format("{} disagrees with {}: the allocation has {} nodes; drop one or make them agree",
                                               instances.label(), e->instances->label(), e->instances->value)});
  return instances;
}

Sourced choose_node_rank(const Overrides& ov, const std::optional<EnvIdentity>& e, const Sourced& instances,
                         const std::string& hostname, bool count_missing, Problems& out) {
  Sourced node_rank{0, "default", ""};
  if (ov.node_rank) node_rank = {*ov.node_rank, "flags", "--node-rank"};
  else if (e && e->node_rank) node_rank = *e->node_rank;
  if (e && e->scheduler && e->node_rank && node_rank.source == "flags" && node_rank.value != e->node_rank->value)
    out.push_back({node_rank.path, fmt::format("{} disagrees with {}; drop one or make them agree", node_rank.label(),
                                               e->node_rank->label())});
  else if (!count_missing && node_rank.value >= instances.value && node_rank.value >= 0)
    out.push_back({node_rank.path.empty() ? "--node-rank" : node_rank.path,
                   fmt::format("node rank {} is not below the node count: {} but {}; node ranks run from 0 to nodes-1",
                               node_rank.value, node_rank.label(), instances.label())});
  if (e && e->scheduler && !e->node_rank && !ov.node_rank && instances.value > 1 && !e->rank_reported) {
    if (e->source == "slurm")
      out.push_back({"SLURM_NODEID", fmt::format("is not set, and neither SLURMD_NODENAME nor this host's name \"{}\" "
                                                 "is in the node list, so this node's rank is unknown (slurm); run "
                                                 "dtrain through srun, or give --node-rank", hostname)});
    else if (e->source == "sagemaker")
      out.push_back({"SM_CURRENT_HOST", "is not set, so this node's rank is unknown (sagemaker); give --node-rank"});
  }
  return node_rank;
}

void choose_master(NodeIdentity& id, const JobSpec& spec, const Overrides& ov, const std::optional<EnvIdentity>& e,
                   const Environment& env, Problems& out) {
  id.field_sources["master_addr"] = "default";
  if (ov.master_addr) {
    id.master_addr = *ov.master_addr;
    id.field_sources["master_addr"] = "flags";
  } else if (e && !e->master.empty()) {
    id.master_addr = e->master;
    id.field_sources["master_addr"] = e->source;
  } else if (spec.rendezvous.endpoint) {
    try {
      id.master_addr = net::parse_host_port(*spec.rendezvous.endpoint, "endpoint").host;
      id.field_sources["master_addr"] = ov.flag_for("/rendezvous/endpoint") != nullptr ? "flags" : "spec";
    } catch (const ConfigError&) {
    }
  }
  if (ov.master_port) {
    id.master_port = ov.master_port;
    id.field_sources["master_port"] = "flags";
  } else if (auto p = exported_master_port(env, out)) {
    id.master_port = p;
    id.field_sources["master_port"] = e && e->source == "torch-env" ? "torch-env" : "env";
  }
}

}  // namespace

namespace detail {

NodeIdentity discover_identity(const JobSpec& spec, const Overrides& ov, const Environment& env, Problems& out) {
  NodeIdentity id;
  std::optional<EnvIdentity> e;
  if (!ov.standalone) {  // --standalone: one node, whatever the environment says
    e = from_hosts(ov, env);
    if (!e) e = from_sagemaker(env, out);
    if (!e) e = from_slurm(env, out);
    if (!e) e = from_kubernetes(env, out);
  }
  Sourced instances = choose_instances(spec, ov, e, out);
  bool count_missing = detail::check_indexed_job_count(e, instances, out);
  Sourced node_rank = choose_node_rank(ov, e, instances, env.hostname, count_missing, out);
  id.instances = instances.value;
  id.node_rank = node_rank.value;
  id.field_sources["instances"] = instances.source;
  id.field_sources["node_rank"] = node_rank.source;
  choose_master(id, spec, ov, e, env, out);
  if (e) {
    id.hosts = e->hosts;
    id.host = e->host;
    id.warnings = e->warnings;
    if (!id.hosts.empty()) id.field_sources["hosts"] = e->source;
    if (e->gpus) {
      id.gpus_per_instance = e->gpus;
      id.field_sources["gpus_per_instance"] = e->source;
    }
    if (e->run_id) {
      id.run_id = e->run_id;
      id.field_sources["run_id"] = e->source;
    }
  }
  if (id.host.empty()) id.host = env.hostname;
  // With a host list, this node's name follows from its rank (flags may pick the rank); a machine
  // that is not one of -H's hosts keeps its own.
  bool outside = e && e->source == "hosts" && !e->node_rank && !ov.node_rank;
  if (!id.hosts.empty() && !outside && id.node_rank >= 0 && id.node_rank < static_cast<int>(id.hosts.size()))
    id.host = id.hosts[static_cast<std::size_t>(id.node_rank)];

  std::vector<std::string> srcs;
  for (const auto* s : {&instances.source, &node_rank.source})
    if (*s != "default" && std::find(srcs.begin(), srcs.end(), *s) == srcs.end()) srcs.push_back(*s);
  id.source = srcs.empty() ? "default" : text::join(srcs, "+");
  return id;
}

}  // namespace detail

NodeIdentity discover_identity(const JobSpec& spec, const Overrides& overrides, const Environment& env) {
  std::vector<SpecProblem> problems;
  NodeIdentity id = detail::discover_identity(spec, overrides, env, problems);
  if (!problems.empty()) throw SpecError("node identity", std::move(problems));
  return id;
}

}  // namespace dtrain::config
