// The plan: cluster size, rank table, batch math, run id and rendezvous endpoint.
#include "dtrain/config/plan.hpp"


#include <charconv>
#include <filesystem>
#include <random>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/net.hpp"
#include "dtrain/common/system.hpp"
#include "dtrain/common/text.hpp"
#include "identity_internal.hpp"

namespace dtrain::config {
namespace {

using json = nlohmann::json;
constexpr long long kMaxWorld = 1 << 20;

bool is_index(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

std::string hex_id(std::uint64_t x, int digits) { return fmt::format("{:0{}x}", x & ((1ULL << (4 * digits)) - 1), digits); }

}  // namespace

int count_visible_gpus(const Environment& env) {
  if (const std::string* t = env.get("DTRAIN_TEST_GPUS"); t != nullptr && !t->empty()) {
    int n = -1;
    auto [p, ec] = std::from_chars(t->data(), t->data() + t->size(), n);
    if (ec != std::errc{} || p != t->data() + t->size() || n < 0 || n > 4096)
      throw ConfigError(fmt::format("DTRAIN_TEST_GPUS={}: expected a GPU count from 0 to 4096", *t));
    return n;
  }
  int devices = 0;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(env.dev_dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.rfind("nvidia", 0) == 0 && is_index(std::string_view(name).substr(6))) ++devices;
  }
  if (devices == 0) return 0;
  const std::string* cvd = env.get("CUDA_VISIBLE_DEVICES");
  if (cvd == nullptr) return devices;
  // As CUDA reads it: entries up to the first invalid one count.
  int visible = 0;
  for (const auto& entry : text::split(*cvd, ',')) {
    std::string_view e = entry;
    while (!e.empty() && e.front() == ' ') e.remove_prefix(1);
    if (e.rfind("GPU-", 0) == 0 || e.rfind("MIG-", 0) == 0) {
      ++visible;
      continue;
    }
    int idx = -1;
    auto [p, ec2] = std::from_chars(e.data(), e.data() + e.size(), idx);
    if (e.empty() || ec2 != std::errc{} || p != e.data() + e.size() || idx < 0 || idx >= devices) break;
    ++visible;
  }
  return visible;
}

int count_visible_gpus() { return count_visible_gpus(Environment::current()); }

int count_cpu_slots(const Environment& env) {
  if (env.cpu_slots) return std::max(1, *env.cpu_slots);
  return sys::usable_cpus();
}

namespace {

using Problems = std::vector<SpecProblem>;

// Workers per node: flags > spec > SageMaker's GPU count > visible GPUs > CPU cores.
void place_workers(Plan& plan, const Overrides& ov, const Environment& env, Problems& problems) {
  int visible = -1;  // counted lazily
  auto gpus = [&] {
    if (visible < 0) visible = count_visible_gpus(env);
    return visible;
  };
  const auto& cl = plan.spec.cluster;
  bool spec_cpu = cl.procs_per_instance.has_value() && !cl.gpus_per_instance;
  if (ov.nproc_per_node) {
    plan.procs_per_instance = *ov.nproc_per_node;
    plan.slots_source = "flags";
    plan.use_gpus = cl.gpus_per_instance.has_value() ||
                    (!spec_cpu && (plan.identity.gpus_per_instance.value_or(0) > 0 || gpus() > 0));
  } else if (cl.gpus_per_instance) {
    plan.procs_per_instance = *cl.gpus_per_instance;
    plan.use_gpus = true;
    plan.slots_source = "spec";
  } else if (cl.procs_per_instance) {
    plan.procs_per_instance = *cl.procs_per_instance;
    plan.slots_source = "spec";
  } else if (plan.identity.gpus_per_instance.value_or(0) > 0) {
    plan.procs_per_instance = *plan.identity.gpus_per_instance;
    plan.use_gpus = true;
    plan.slots_source = plan.identity.field_sources["gpus_per_instance"];
  } else if (gpus() > 0) {
    plan.procs_per_instance = gpus();
    plan.use_gpus = true;
    plan.slots_source = "gpus";
  } else {
    plan.procs_per_instance = count_cpu_slots(env);
    plan.slots_source = "cpu cores";
  }
  if (cl.bind_gpus && plan.use_gpus && gpus() > 0 && plan.procs_per_instance > gpus())
    problems.push_back({"/cluster/bind_gpus", fmt::format("true needs one GPU per worker, but {} workers per node and only "
                                                          "{} GPUs visible here", plan.procs_per_instance, gpus())});
}

std::string world_why(const Plan& plan) {
  return fmt::format("{} instance{} x {} {} per instance", plan.instances, plan.instances == 1 ? "" : "s",
                     plan.procs_per_instance, plan.use_gpus ? "GPU workers" : "workers");
}

// World size and the rank table: node n holds ranks n x per-node .. + per-node - 1.
void number_ranks(Plan& plan, Problems& problems) {
  long long world = static_cast<long long>(plan.instances) * plan.procs_per_instance;
  if (world > kMaxWorld) {
    problems.push_back({"/cluster", fmt::format("world size {} ({}) is more than {} ranks", world, world_why(plan), kMaxWorld)});
    world = 1;
  }
  plan.world_size = static_cast<int>(world);
  if (!problems.empty()) return;
  plan.ranks.reserve(static_cast<std::size_t>(world));
  for (int n = 0; n < plan.instances; ++n)
    for (int l = 0; l < plan.procs_per_instance; ++l) plan.ranks.push_back({n * plan.procs_per_instance + l, n, l});
}

// Warns when a tensor group spans nodes: its all-reduces then cross the network every layer.
void check_tensor_groups(Plan& plan) {
  if (plan.layout.tensor == 1 || plan.ranks.empty()) return;
  for (const auto& g : plan.layout.groups(GroupKind::tensor)) {
    int first = plan.ranks[static_cast<std::size_t>(g.front())].node_rank;
    for (int r : g)
      if (plan.ranks[static_cast<std::size_t>(r)].node_rank != first) {
        plan.warnings.push_back(fmt::format(
            "tensor group [{}] spans nodes {} and {}: its all-reduces cross the network in every layer; keep "
            "tensor <= {} workers per node and tensor fastest in parallel.order", fmt::join(g, " "), first,
            plan.ranks[static_cast<std::size_t>(r)].node_rank, plan.procs_per_instance));
        return;
      }
  }
}

// pipeline x tensor x data = world size; data derived when unset. False when they do not agree.
bool plan_layout(Plan& plan, Problems& problems) {
  const auto& ps = plan.spec.parallel;
  Layout& l = plan.layout;
  l.pipeline = ps.pipeline;
  l.tensor = ps.tensor;
  (void)parse_order(ps.order, l.order);  // validated with the spec
  plan.schedule = ps.schedule;
  const int model = ps.pipeline * ps.tensor;
  if (plan.world_size % model != 0) {
    problems.push_back({"/parallel", fmt::format("world size {} ({}) does not divide by pipeline {} x tensor {} = {}; "
                                                 "change the stages, the shards or the workers", plan.world_size,
                                                 world_why(plan), ps.pipeline, ps.tensor, model)});
    return false;
  }
  l.data = plan.world_size / model;
  if (ps.data && *ps.data != l.data) {
    problems.push_back({"/parallel/data", fmt::format("{} replicas x pipeline {} x tensor {} = {} ranks, but the world "
                                                      "size is {} ({}); leave data out to derive it ({})", *ps.data,
                                                      ps.pipeline, ps.tensor, static_cast<long long>(*ps.data) * model,
                                                      plan.world_size, world_why(plan), l.data)});
    return false;
  }
  check_tensor_groups(plan);
  return true;
}

// The replicas the batch math divides by: "world size 16" or, with model parallelism,
// "4 replicas (data degree: world size 16 / (pipeline 2 x tensor 2))".
std::string replicas_text(const Plan& plan) {
  if (plan.layout.data_only()) return fmt::format("world size {}", plan.world_size);
  return fmt::format("{} replicas (data degree: world size {} / (pipeline {} x tensor {}))", plan.layout.data,
                     plan.world_size, plan.layout.pipeline, plan.layout.tensor);
}

// Batch math over the replicas (the data degree): global = replicas x per_replica.
void plan_batch(Plan& plan, Problems& problems) {
  const auto& b = plan.spec.batch;
  const long long replicas = plan.layout.data;
  BatchPlan bp;
  bp.micro_batches = b.micro_batches;
  bp.epochs = b.epochs;
  bp.dataset_size = b.dataset_size;
  if (b.per_replica) {
    bp.per_replica = *b.per_replica;
    bp.global = replicas * bp.per_replica;
    if (b.global && *b.global != bp.global) {
      problems.push_back({"/batch/global", fmt::format("{} is not {} x per_replica {} = {}; give only one of global and "
                                                       "per_replica, or make them agree", *b.global, replicas_text(plan),
                                                       bp.per_replica, bp.global)});
      return;
    }
  } else if (b.global) {
    bp.global = *b.global;
    if (bp.global % replicas != 0) {
      long long lo = bp.global / replicas * replicas, hi = lo + replicas;
      std::string why = plan.layout.data_only() ? fmt::format(" ({})", world_why(plan)) : "";
      problems.push_back({"/batch/global", fmt::format("{} does not divide by {}{}; nearest that do: {}", bp.global,
                                                       replicas_text(plan), why,
                                                       lo > 0 ? fmt::format("{} or {}", lo, hi) : fmt::format("{}", hi))});
      return;
    }
    bp.per_replica = bp.global / replicas;
    if (bp.per_replica % bp.micro_batches != 0) {
      problems.push_back({"/batch/global", fmt::format("{} gives per_replica {} at {}, which does not divide by "
                                                       "micro_batches {}", bp.global, bp.per_replica, replicas_text(plan),
                                                       bp.micro_batches)});
      return;
    }
  }
  if (bp.per_replica <= 0) return;
  bp.micro_batch_size = bp.per_replica / bp.micro_batches;
  if (bp.dataset_size && *bp.dataset_size < bp.global) {
    problems.push_back({"/batch/dataset_size", fmt::format("{} is smaller than the global batch {} ({} x per_replica {}): "
                                                           "not one full batch per epoch; raise dataset_size or lower "
                                                           "the batch", *bp.dataset_size, bp.global, replicas_text(plan),
                                                           bp.per_replica)});
    return;
  }
  if (bp.dataset_size) {
    std::int64_t ipe = (*bp.dataset_size + bp.global - 1) / bp.global;
    std::int64_t total = 0;
    if (__builtin_mul_overflow(ipe, bp.epochs, &total))
      problems.push_back({"/batch/epochs", fmt::format("{} epochs of {} iterations overflow the iteration count", bp.epochs, ipe)});
    bp.iterations_per_epoch = ipe;
    bp.total_iterations = total;
  }
  plan.batch = bp;
}

// Run id: spec > Slurm job id > generated (single node) or derived from the spec (several nodes,
// so every node computes the same one).
void choose_run_id(Plan& plan) {
  const auto& spec = plan.spec;
  if (spec.rendezvous.run_id) {
    plan.run_id = *spec.rendezvous.run_id;
    plan.run_id_source = "spec";
  } else if (plan.identity.run_id) {
    plan.run_id = *plan.identity.run_id;
    plan.run_id_source = plan.identity.field_sources["run_id"];
  } else if (plan.instances > 1) {
    std::string key = spec.name + "\n" + text::join(spec.command, "\x1f") + "\n" + std::to_string(plan.instances) + "\n" +
                      spec.rendezvous.endpoint.value_or(plan.identity.master_addr);
    plan.run_id = spec.name + "-" + hex_id(text::fnv1a(key), 12);
    plan.run_id_source = "derived";
  } else {
    std::random_device rd;
    std::uint64_t r = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
    plan.run_id = spec.name + "-" + hex_id(r, 12);
    plan.run_id_source = "generated";
  }
}

void choose_endpoint(Plan& plan, const Overrides& ov, Problems& problems) {
  const auto& spec = plan.spec;
  if (spec.rendezvous.endpoint) {
    plan.rdzv_endpoint = *spec.rendezvous.endpoint;
    plan.rdzv_source = ov.rdzv ? "flags" : "spec";
  } else if (plan.instances > 1) {
    const auto& src = plan.identity.field_sources["master_addr"];
    if (src != "default" && !plan.identity.master_addr.empty()) {
      plan.rdzv_endpoint = net::endpoint_text(plan.identity.master_addr,
                                              plan.identity.master_port.value_or(kDefaultRdzvPort));
      plan.rdzv_source = src;
    } else {
      problems.push_back({"/rendezvous/endpoint",
                          fmt::format("unset, but the job has {} nodes and none of them is known as node 0; set "
                                      "rendezvous.endpoint or --rdzv HOST:PORT (or run under Slurm, SageMaker or with "
                                      "MASTER_ADDR)", plan.instances)});
    }
  } else {
    plan.rdzv_source = "standalone";
  }
}

}  // namespace

Plan make_plan(const JobSpec& spec, const Overrides& ov, const Environment& env) {
  Problems problems;
  Plan plan;
  plan.spec = spec;
  plan.identity = detail::discover_identity(spec, ov, env, problems);
  plan.instances = plan.identity.instances;
  place_workers(plan, ov, env, problems);
  number_ranks(plan, problems);
  if (plan_layout(plan, problems) && spec.has_batch) plan_batch(plan, problems);
  choose_run_id(plan);
  choose_endpoint(plan, ov, problems);
  if (!problems.empty()) {
    std::string source = spec.source.empty() ? std::string("job spec") : spec.source.string();
    throw SpecError(source, std::move(problems));
  }
  return plan;
}

namespace {

constexpr GroupKind kKinds[] = {GroupKind::tensor, GroupKind::pipeline, GroupKind::data};

json parallel_json(const Plan& plan) {
  const Layout& l = plan.layout;
  json groups;
  for (GroupKind k : kKinds) groups[group_kind_name(k)] = l.groups(k);
  return {{"pipeline", l.pipeline}, {"tensor", l.tensor},   {"data", l.data},
          {"order", l.order_text()}, {"schedule", plan.schedule}, {"groups", std::move(groups)}};
}

// "[0 1] node 0" or "[0 4] nodes 0,1"
std::string group_text(const Plan& plan, const std::vector<int>& g) {
  std::vector<int> nodes;
  for (int r : g) {
    int n = plan.ranks.empty() ? 0 : plan.ranks[static_cast<std::size_t>(r)].node_rank;
    if (std::find(nodes.begin(), nodes.end(), n) == nodes.end()) nodes.push_back(n);
  }
  return fmt::format("[{}] node{} {}", fmt::join(g, " "), nodes.size() == 1 ? "" : "s", fmt::join(nodes, ","));
}

// The layout rows of `dtrain plan`: the degrees, then every group of each kind (a few when many).
std::string parallel_text(const Plan& plan) {
  const Layout& l = plan.layout;
  std::string out = fmt::format("{:<12}pipeline {} x tensor {} x data {} = {} ranks in {} replica{} (order {}, "
                                "schedule {})\n", "parallel", l.pipeline, l.tensor, l.data, l.world(), l.data,
                                l.data == 1 ? "" : "s", l.order_text(), plan.schedule);
  for (GroupKind k : kKinds) {
    auto gs = l.groups(k);
    std::string line;
    const std::size_t shown = std::min<std::size_t>(gs.size(), 8);
    for (std::size_t i = 0; i < shown; ++i) line += (i ? " | " : "") + group_text(plan, gs[i]);
    if (gs.size() > shown) line += fmt::format(" | ... ({} in all)", gs.size());
    out += fmt::format("{:<12}{} groups, {} x {} rank{}: {}\n", "", group_kind_name(k), gs.size(), l.size(k),
                       l.size(k) == 1 ? "" : "s", line);
  }
  return out;
}

// The rank table; the dp/pp/tp coordinates too when the model is split.
std::string rank_table(const Plan& plan) {
  const bool coords = !plan.layout.data_only();
  std::string out = coords ? "\n  rank  node  local    dp    pp    tp\n" : "\n  rank  node  local\n";
  const std::size_t n = plan.ranks.size();
  const std::size_t head = 16, tail = 8;
  for (std::size_t i = 0; i < n; ++i) {
    if (n > head + tail + 1 && i == head) {
      out += fmt::format("   ...  ({} more ranks; dtrain plan --json lists all)\n", n - head - tail);
      i = n - tail - 1;
      continue;
    }
    const auto& r = plan.ranks[i];
    out += fmt::format("{:>6}{:>6}{:>7}", r.rank, r.node_rank, r.local_rank);
    if (coords) {
      Coords c = plan.layout.coords(r.rank);
      out += fmt::format("{:>6}{:>6}{:>6}", c.dp, c.pp, c.tp);
    }
    out += r.node_rank == plan.identity.node_rank ? "  *\n" : "\n";
  }
  out += "\n(* = this node)\n";
  return out;
}

}  // namespace

std::string plan_to_json(const Plan& plan, int indent) {
  const auto& s = plan.spec;
  json j;
  j["version"] = s.version;
  j["name"] = s.name;
  j["run_id"] = plan.run_id;
  j["run_id_source"] = plan.run_id_source;
  j["spec_file"] = s.source.string();
  j["command"] = s.command;
  j["workdir"] = s.workdir;
  j["world_size"] = plan.world_size;
  j["instances"] = plan.instances;
  j["procs_per_instance"] = plan.procs_per_instance;
  j["local_world_size"] = plan.procs_per_instance;
  j["node_rank"] = plan.identity.node_rank;
  j["use_gpus"] = plan.use_gpus;
  j["bind_gpus"] = s.cluster.bind_gpus;
  j["slots_source"] = plan.slots_source;
  j["master_addr"] = plan.identity.master_addr;
  j["master_port"] = plan.identity.master_port ? json(*plan.identity.master_port) : json(nullptr);
  j["host"] = plan.identity.host;
  j["hosts"] = plan.identity.hosts;
  j["identity_source"] = plan.identity.source;
  j["identity_sources"] = plan.identity.field_sources;
  json r;
  r["endpoint"] = plan.rdzv_endpoint.empty() ? json(nullptr) : json(plan.rdzv_endpoint);
  r["source"] = plan.rdzv_source;
  r["join_timeout_s"] = s.rendezvous.join_timeout_s;
  r["heartbeat_s"] = s.rendezvous.heartbeat_s;
  r["heartbeat_timeout_s"] = s.rendezvous.heartbeat_timeout_s.value_or(3 * s.rendezvous.heartbeat_s);
  r["token_file"] = s.rendezvous.token_file ? json(*s.rendezvous.token_file) : json(nullptr);
  j["rendezvous"] = r;
  j["restart"] = {{"max_restarts", s.restart.max_restarts}, {"backoff_s", s.restart.backoff_s}};
  j["env"] = s.env;
  j["output"] = {{"tag", s.output.tag},
                 {"tag_format", s.output.tag_format},
                 {"timestamps", s.output.timestamps},
                 {"log_dir", s.output.log_dir ? json(*s.output.log_dir) : json(nullptr)}};
  j["grace_s"] = s.grace_s;
  j["max_runtime_s"] = s.max_runtime_s ? json(*s.max_runtime_s) : json(nullptr);
  if (plan.batch) {
    const auto& b = *plan.batch;
    auto opt = [](const std::optional<std::int64_t>& v) { return v ? json(*v) : json(nullptr); };
    j["batch"] = {{"global", b.global},
                  {"per_replica", b.per_replica},
                  {"micro_batches", b.micro_batches},
                  {"micro_batch_size", b.micro_batch_size},
                  {"dataset_size", opt(b.dataset_size)},
                  {"epochs", b.epochs},
                  {"iterations_per_epoch", opt(b.iterations_per_epoch)},
                  {"total_iterations", opt(b.total_iterations)}};
  } else {
    j["batch"] = nullptr;
  }
  j["parallel"] = parallel_json(plan);
  json ranks = json::array();
  for (const auto& rk : plan.ranks) {
    Coords c = plan.layout.coords(rk.rank);
    ranks.push_back({{"rank", rk.rank}, {"node_rank", rk.node_rank}, {"local_rank", rk.local_rank},
                     {"dp_rank", c.dp}, {"pp_rank", c.pp}, {"tp_rank", c.tp}});
  }
  j["ranks"] = std::move(ranks);
  j["warnings"] = plan.warnings;
  return j.dump(indent, ' ', false, json::error_handler_t::replace);
}

std::string plan_to_text(const Plan& plan) {
  const auto& s = plan.spec;
  const auto& id = plan.identity;
  std::string out;
  auto row = [&](std::string_view key, const std::string& value) { out += fmt::format("{:<12}{}\n", key, value); };
  std::string cmd;
  for (const auto& a : s.command) {
    if (!cmd.empty()) cmd += ' ';
    bool quote = a.empty() || a.find_first_of(" \t\"'$\\") != std::string::npos;
    cmd += quote ? "'" + a + "'" : a;
  }
  row("job", fmt::format("{} (run id {}, {})", s.name, plan.run_id, plan.run_id_source));
  if (!s.source.empty()) row("spec", s.source.string());
  row("command", cmd);
  row("cluster", fmt::format("{} instance{} x {} {} = world size {}", plan.instances, plan.instances == 1 ? "" : "s",
                             plan.procs_per_instance,
                             plan.use_gpus ? (plan.procs_per_instance == 1 ? "GPU worker" : "GPU workers")
                                           : (plan.procs_per_instance == 1 ? "CPU worker" : "CPU workers"),
                             plan.world_size));
  row("", fmt::format("workers per instance from {}", plan.slots_source));
  std::string me = fmt::format("node rank {} of {}", id.node_rank, plan.instances);
  if (!id.host.empty()) me += ", host " + id.host;
  row("this node", me);
  std::string srcs;
  for (const auto& [k, v] : id.field_sources) srcs += fmt::format("{}{}={}", srcs.empty() ? "" : ", ", k, v);
  row("identity", fmt::format("{} ({})", id.source, srcs));
  row("master", id.master_addr + (id.master_port ? fmt::format(":{}", *id.master_port) : std::string()));
  if (!id.hosts.empty()) {
    std::vector<std::string> shown(id.hosts.begin(), id.hosts.begin() + static_cast<long>(std::min<std::size_t>(id.hosts.size(), 8)));
    row("hosts", text::join(shown, " ") + (id.hosts.size() > 8 ? fmt::format(" ... ({} in all)", id.hosts.size()) : ""));
  }
  row("rendezvous", plan.rdzv_endpoint.empty() ? std::string("standalone store on this node (loopback)")
                                               : fmt::format("{} ({})", plan.rdzv_endpoint, plan.rdzv_source));
  row("", fmt::format("join timeout {} s, heartbeat every {} s, lost after {} s{}", s.rendezvous.join_timeout_s,
                      s.rendezvous.heartbeat_s, s.rendezvous.heartbeat_timeout_s.value_or(3 * s.rendezvous.heartbeat_s),
                      s.rendezvous.token_file ? ", token from " + *s.rendezvous.token_file : std::string(", no token")));
  if (!plan.layout.data_only()) out += parallel_text(plan);
  if (plan.batch) {
    const auto& b = *plan.batch;
    row("batch", fmt::format("global {} = {} replicas x per-replica {}", b.global, plan.layout.data, b.per_replica));
    row("", fmt::format("{} micro-batch{} of {}", b.micro_batches, b.micro_batches == 1 ? "" : "es", b.micro_batch_size));
    if (b.dataset_size)
      row("", fmt::format("{} samples: {} iterations per epoch x {} epoch{} = {} iterations", *b.dataset_size,
                          *b.iterations_per_epoch, b.epochs, b.epochs == 1 ? "" : "s", *b.total_iterations));
  } else {
    row("batch", "none (the spec has no batch section)");
  }
  row("restarts", fmt::format("{} (backoff {} s), grace {} s{}", s.restart.max_restarts, s.restart.backoff_s, s.grace_s,
                              s.max_runtime_s ? fmt::format(", max runtime {} s", *s.max_runtime_s) : std::string()));
  if (!s.env.empty()) {
    std::string e;
    for (const auto& [k, v] : s.env) e += fmt::format("{}{}={}", e.empty() ? "" : " ", k, v);
    row("env", e);
  }
  out += rank_table(plan);
  return out;
}

}  // namespace dtrain::config
