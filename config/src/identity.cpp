// Node identity: who am I and who are the others, field by field from
// flags > job spec > environment (SageMaker, Slurm, torch/Kubernetes env) > defaults.
#include <unistd.h>

#include <algorithm>
#include <charconv>
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

extern char** environ;

namespace dtrain::config {

Environment Environment::current() {
  Environment env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view kv(*e);
    auto eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    env.vars.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) == 0) env.hostname = name;
  return env;
}

const std::string* Environment::get(const std::string& name) const {
  auto it = vars.find(name);
  return it == vars.end() ? nullptr : &it->second;
}

namespace {

using json = nlohmann::json;
using Problems = std::vector<SpecProblem>;

std::optional<long long> to_int(const std::string& s) {
  long long v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc{} || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// One value with where it came from, for messages: "SLURM_NODEID=1 (slurm)".
struct Sourced {
  int value = 0;
  std::string source;  // "flags", "spec", "slurm", ...
  std::string path;    // "--nodes", "/cluster/instances", "SLURM_NNODES"
  std::string label() const {
    if (source == "default") return fmt::format("default {}", value);
    if (path.rfind("--", 0) == 0) return fmt::format("{} {} (flags)", path, value);
    if (path.rfind('/', 0) == 0) return fmt::format("{} {} (job spec)", path, value);
    return fmt::format("{}={} ({})", path, value, source);
  }
};

struct EnvIdentity {
  std::string source;
  bool scheduler = false;  // Slurm/SageMaker: the allocation is the truth; flags may restate it only
  std::optional<Sourced> node_rank;
  std::optional<Sourced> instances;
  std::string master;
  std::optional<int> master_port;
  std::vector<std::string> hosts;
  std::string host;
  std::optional<int> gpus;
  std::optional<std::string> run_id;
};

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

void hosts_identity(EnvIdentity& id, const std::string& current, const std::string& current_var,
                    const std::string& hosts_what, Problems& out) {
  auto it = std::find(id.hosts.begin(), id.hosts.end(), current);
  if (it == id.hosts.end()) {
    std::string shown = text::join(std::span<const std::string>(id.hosts.data(), std::min<std::size_t>(id.hosts.size(), 8)), ", ");
    if (id.hosts.size() > 8) shown += ", ...";
    out.push_back({current_var, fmt::format("host \"{}\" ({}) is not in {} [{}]", current, id.source, hosts_what, shown)});
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
  id.hosts.erase(std::unique(id.hosts.begin(), id.hosts.end()), id.hosts.end());
  id.instances = Sourced{static_cast<int>(id.hosts.size()), "sagemaker", what == "SM_HOSTS" ? "SM_HOSTS" : what + " hosts"};
  id.master = id.hosts.front();
  hosts_identity(id, cfg["current_host"].get<std::string>(), what == "SM_HOSTS" ? "SM_CURRENT_HOST" : what + " current_host",
                 what, out);
  id.gpus = env_int(env, "SM_NUM_GPUS", "sagemaker", 0, 4096, out);
  return id;
}

std::optional<EnvIdentity> from_slurm(const Environment& env, Problems& out) {
  std::string list_var = "SLURM_JOB_NODELIST";
  const std::string* list = env.get(list_var);
  if (list == nullptr) {
    list_var = "SLURM_NODELIST";
    list = env.get(list_var);
  }
  if (list == nullptr) return std::nullopt;
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
  id.instances = Sourced{static_cast<int>(id.hosts.size()), "slurm", list_var};
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
  return id;
}

std::optional<EnvIdentity> from_torch_env(const Environment& env, Problems& out) {
  // A worker of dtrain (or torchrun) carries LOCAL_RANK/DTRAIN_RUN_ID: its RANK/WORLD_SIZE count
  // processes, not nodes, so they are not a node identity.
  if (env.get("LOCAL_RANK") != nullptr || env.get("DTRAIN_RUN_ID") != nullptr) return std::nullopt;
  const std::string* addr = env.get("MASTER_ADDR");
  bool rank_and_size = env.get("RANK") != nullptr && env.get("WORLD_SIZE") != nullptr;
  if (addr == nullptr && !rank_and_size) return std::nullopt;
  EnvIdentity id;
  id.source = "torch-env";
  if (addr != nullptr && !addr->empty()) id.master = *addr;
  if (auto p = env_int(env, "MASTER_PORT", "torch env", 1, 65535, out)) id.master_port = *p;
  if (auto n = env_int(env, "WORLD_SIZE", "torch env: the number of nodes", 1, 65536, out))
    id.instances = Sourced{*n, "torch-env", "WORLD_SIZE"};
  if (auto r = env_int(env, "RANK", "torch env: this node's rank", 0, 65535, out))
    id.node_rank = Sourced{*r, "torch-env", "RANK"};
  return id;
}

}  // namespace

namespace detail {

NodeIdentity discover_identity(const JobSpec& spec, const Overrides& ov, const Environment& env, Problems& out) {
  NodeIdentity id;
  std::optional<EnvIdentity> e = from_sagemaker(env, out);
  if (!e) e = from_slurm(env, out);
  if (!e) e = from_torch_env(env, out);

  Sourced instances{1, "default", ""};
  if (ov.nodes) instances = {*ov.nodes, "flags", "--nodes"};
  else if (spec.cluster.instances) instances = {*spec.cluster.instances, "spec", "/cluster/instances"};
  else if (e && e->instances) instances = *e->instances;
  if (e && e->scheduler && e->instances && instances.source != e->source && instances.value != e->instances->value)
    out.push_back({instances.path, fmt::format("{} disagrees with {}: the allocation has {} nodes; drop one or make them agree",
                                               instances.label(), e->instances->label(), e->instances->value)});

  Sourced node_rank{0, "default", ""};
  if (ov.node_rank) node_rank = {*ov.node_rank, "flags", "--node-rank"};
  else if (e && e->node_rank) node_rank = *e->node_rank;
  if (e && e->scheduler && e->node_rank && node_rank.source == "flags" && node_rank.value != e->node_rank->value)
    out.push_back({node_rank.path, fmt::format("{} disagrees with {}; drop one or make them agree", node_rank.label(),
                                               e->node_rank->label())});
  else if (node_rank.value >= instances.value && node_rank.value >= 0)
    out.push_back({node_rank.path.empty() ? "--node-rank" : node_rank.path,
                   fmt::format("node rank {} is not below the node count: {} but {}; node ranks run from 0 to nodes-1",
                               node_rank.value, node_rank.label(), instances.label())});
  if (e && e->scheduler && !e->node_rank && !ov.node_rank && instances.value > 1)
    out.push_back({e->source == "slurm" ? "SLURM_NODEID" : "SM_CURRENT_HOST",
                   fmt::format("is not set, so this node's rank is unknown ({}); run dtrain through srun, or give "
                               "--node-rank", e->source)});

  id.instances = instances.value;
  id.node_rank = node_rank.value;
  id.field_sources["instances"] = instances.source;
  id.field_sources["node_rank"] = node_rank.source;

  if (e && !e->master.empty()) {
    id.master_addr = e->master;
    id.field_sources["master_addr"] = e->source;
  } else if (spec.rendezvous.endpoint) {
    try {
      id.master_addr = net::parse_host_port(*spec.rendezvous.endpoint, "endpoint").host;
      id.field_sources["master_addr"] = ov.rdzv ? "flags" : "spec";
    } catch (const ConfigError&) {
      id.field_sources["master_addr"] = "default";
    }
  } else {
    id.field_sources["master_addr"] = "default";
  }
  if (e && e->master_port) {
    id.master_port = e->master_port;
    id.field_sources["master_port"] = e->source;
  }
  if (e) {
    id.hosts = e->hosts;
    id.host = e->host;
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
  // With a host list, this node's name follows from its rank (flags may pick the rank).
  if (!id.hosts.empty() && id.node_rank >= 0 && id.node_rank < static_cast<int>(id.hosts.size()))
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
