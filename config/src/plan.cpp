// The plan: cluster size, rank table, batch math, run id and rendezvous endpoint.
#include "dtrain/config/plan.hpp"


#include <charconv>
#include <cmath>
#include <filesystem>
#include <random>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/net.hpp"
#include "dtrain/common/system.hpp"
#include "dtrain/common/text.hpp"
#include "dtrain/config/instance_types.hpp"
#include "identity_internal.hpp"

namespace dtrain::config {
namespace {

constexpr long long kMaxWorld = 1 << 20;

std::string hex_id(std::uint64_t x, int digits) { return fmt::format("{:0{}x}", x & ((1ULL << (4 * digits)) - 1), digits); }

}  // namespace

namespace {

using Problems = std::vector<SpecProblem>;

// Workers per node: flags > spec > SageMaker's GPU count > visible GPUs > CPU cores.
void place_workers(Plan& plan, const Overrides& ov, const Environment& env, Problems& problems) {
  auto gpus = [&] { return env.visible_gpus; };
  const auto& cl = plan.spec.cluster;
  bool spec_cpu = cl.procs_per_instance.has_value() && !cl.gpus_per_instance;
  if (ov.nproc_mode) {  // torchrun's gpu | cpu | auto: counted here, whatever the spec says
    const std::string& m = *ov.nproc_mode;
    plan.slots_source = "flags (" + m + ")";
    if (m == "cpu" || (m == "auto" && gpus() == 0)) {
      plan.procs_per_instance = std::max(1, env.cpu_slots);
    } else if (gpus() > 0) {
      plan.procs_per_instance = gpus();
      plan.use_gpus = true;
    } else {
      plan.procs_per_instance = 1;
      problems.push_back({"--nproc-per-node", "gpu: no GPU is visible on this node (CUDA_VISIBLE_DEVICES, /dev/nvidia*); "
                                              "use cpu, auto or a count"});
    }
  } else if (ov.nproc_per_node) {
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
  } else if (const InstanceType* t = cl.instance_type ? find_instance_type(*cl.instance_type) : nullptr) {
    plan.procs_per_instance = t->gpus;
    plan.use_gpus = true;
    plan.instance_type = *cl.instance_type;
    plan.slots_source = fmt::format("spec (instance_type {}: {} x {})", *cl.instance_type, t->gpus, t->accelerator);
  } else if (ov.default_nproc_per_node) {
    plan.procs_per_instance = *ov.default_nproc_per_node;
    plan.use_gpus = plan.identity.gpus_per_instance.value_or(0) > 0 || gpus() > 0;
    plan.slots_source = "torchrun's default (--nproc-per-node for more)";
  } else if (plan.identity.gpus_per_instance.value_or(0) > 0) {
    plan.procs_per_instance = *plan.identity.gpus_per_instance;
    plan.use_gpus = true;
    plan.slots_source = plan.identity.field_sources["gpus_per_instance"];
  } else if (auto sm = sagemaker_instance_type(env); sm && find_instance_type(sm->first) != nullptr) {
    const InstanceType* sm_type = find_instance_type(sm->first);
    plan.procs_per_instance = sm_type->gpus;
    plan.use_gpus = true;
    plan.instance_type = sm->first;
    plan.slots_source = fmt::format("sagemaker ({}={}: {} x {})", sm->second, sm->first, sm_type->gpus,
                                    sm_type->accelerator);
  } else if (gpus() > 0) {
    plan.procs_per_instance = gpus();
    plan.use_gpus = true;
    plan.slots_source = "gpus";
  } else {
    plan.procs_per_instance = std::max(1, env.cpu_slots);
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
void number_ranks(Plan& plan, Problems& problems, bool table = true) {
  long long world = static_cast<long long>(plan.instances) * plan.procs_per_instance;
  if (world > kMaxWorld) {
    problems.push_back({"/cluster", fmt::format("world size {} ({}) is more than {} ranks", world, world_why(plan), kMaxWorld)});
    world = 1;
  }
  plan.world_size = static_cast<int>(world);
  if (!problems.empty() || !table) return;
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
    if (std::int64_t rest = *bp.dataset_size % bp.global; rest != 0) bp.last_batch = rest;
  }
  if (b.learning_rate) {
    bp.learning_rate = scaled_learning_rate(*b.learning_rate, bp.global);
    bp.warmup_iterations = b.learning_rate->warmup_iterations;
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
  const auto& id = plan.identity;
  if (spec.rendezvous.endpoint) {
    plan.rdzv_endpoint = *spec.rendezvous.endpoint;
    plan.rdzv_source = ov.flag_for("/rendezvous/endpoint") != nullptr ? "flags" : "spec";
  } else if (plan.instances > 1) {
    const auto& src = plan.identity.field_sources.at("master_addr");
    if (src != "default" && !id.master_addr.empty()) {
      // MASTER_PORT is the workers' (rank 0's own store), so the rendezvous takes torchrun's port
      plan.rdzv_endpoint = net::endpoint_text(id.master_addr, kDefaultRdzvPort);
      plan.rdzv_source = src;
      if (id.master_port == kDefaultRdzvPort)
        problems.push_back({id.field_sources.at("master_port") == "flags" ? "--master-port" : "MASTER_PORT",
                            fmt::format("{} is also the port of the rendezvous derived from the master address ({}); "
                                        "pick another master port, or give --rdzv-endpoint HOST:PORT",
                                        kDefaultRdzvPort, plan.rdzv_endpoint)});
    } else {
      problems.push_back({"/rendezvous/endpoint",
                          fmt::format("unset, but the job has {} nodes and none of them is known as node 0; set "
                                      "rendezvous.endpoint, --rdzv-endpoint HOST:PORT or --master-addr (or run under "
                                      "Slurm, SageMaker or with MASTER_ADDR)", plan.instances)});
    }
  } else {
    plan.rdzv_source = "standalone";
  }
}

// What a launch does about the rendezvous token (auth::resolve_token, then the head's own).
std::string token_source(const Plan& plan, const Environment& env) {
  if (plan.rdzv_endpoint.empty()) return "store";  // one node: its own store's token, whatever is given
  if (plan.spec.rendezvous.token_file) return "file";
  if (const std::string* t = env.get("DTRAIN_RDZV_TOKEN"); t != nullptr && !t->empty()) return "DTRAIN_RDZV_TOKEN";
  return starts_every_host(plan) ? "launch" : "";
}

// An elastic range is the spec's (--nnodes MIN:MAX sets it there); other sources give a fixed count.
int choose_min_instances(const Plan& plan) {
  const auto& src = plan.identity.field_sources.at("instances");
  if (src == "flags" || src == "spec") return plan.spec.cluster.min_instances.value_or(plan.instances);
  return plan.instances;
}

// World size, layout and batch plan of `plan` at `instances` nodes (the rank table too when `ranks`).
void size_plan(Plan& plan, int instances, bool ranks, Problems& problems) {
  plan.instances = instances;
  plan.identity.instances = instances;
  plan.ranks.clear();
  plan.batch.reset();
  plan.layout = {};
  auto warnings = plan.warnings;  // the first plan's (a tensor group across nodes is warned about once)
  Problems mine;
  number_ranks(plan, mine, ranks);
  if (mine.empty() && plan_layout(plan, mine) && plan.spec.has_batch) plan_batch(plan, mine);
  plan.warnings = std::move(warnings);
  problems.insert(problems.end(), mine.begin(), mine.end());
}

// An elastic job must run at every size from min to max: the first size it cannot run at is named.
void check_elastic_sizes(const Plan& plan, Problems& problems) {
  if (!plan.elastic() || !problems.empty()) return;
  Plan probe = plan;
  for (int n = plan.min_instances; n < plan.instances; ++n) {
    Problems at;
    size_plan(probe, n, false, at);
    for (auto& p : at)
      problems.push_back({p.path, fmt::format("at {} node{} (elastic {}-{}): {}", n, n == 1 ? "" : "s", plan.min_instances,
                                              plan.instances, p.message)});
    if (!at.empty()) return;
  }
}

// (p-1)/(m+p-1) of each iteration a stage waits, for p stages and m micro-batches; a warning when
// it is more than a quarter.
void plan_bubble(Plan& plan) {
  const std::int64_t p = plan.layout.pipeline;
  if (p <= 1) return;
  const std::int64_t m = plan.batch ? plan.batch->micro_batches : plan.spec.batch.micro_batches;
  const double bubble = static_cast<double>(p - 1) / static_cast<double>(m + p - 1);
  plan.pipeline_bubble = bubble;
  if (bubble <= 0.25) return;
  const std::int64_t m4 = 4 * p;
  plan.warnings.push_back(fmt::format(
      "pipeline bubble (p-1)/(m+p-1) = {}/{} = {:.0f}% of each iteration idle with {} stages and {} micro-batch{}; "
      "raise batch.micro_batches (at {} it is {:.0f}%)", p - 1, m + p - 1, 100 * bubble, p, m, m == 1 ? "" : "es", m4,
      100.0 * static_cast<double>(p - 1) / static_cast<double>(m4 + p - 1)));
}

// The workers per node that -H's slots or -n gave, and -n against the world it planned.
void plan_counts(Plan& plan, const Overrides& given, const Overrides& ov, Problems& problems) {
  if (auto p = detail::given_per_node(plan.spec, ov); p && !ov.hosts.empty() && p->second == ov.hosts_from)
    plan.slots_source = ov.hosts_from;
  else if (ov.total_ranks && ov.nproc_per_node && !given.nproc_per_node)
    plan.slots_source = fmt::format("-n {} over {} nodes", *ov.total_ranks, plan.instances);
  if (ov.total_ranks && problems.empty() && plan.world_size != *ov.total_ranks)
    problems.push_back({"-n", fmt::format("{} disagrees with {}; drop one or make them agree", *ov.total_ranks,
                                          world_why(plan))});
}

void plan_hosts(Plan& plan, const Overrides& ov) {
  HostsPlan h;
  for (const auto& host : ov.hosts) h.names.push_back(host.name);
  h.from = ov.hosts_from;
  if (!ov.launch_agent.empty()) h.launch_agent = ov.launch_agent;
  const std::string& src = plan.identity.field_sources.at("node_rank");
  if (src == "hosts" || src == "flags") h.this_host = plan.identity.node_rank;
  plan.hosts = std::move(h);
}

}  // namespace

double scaled_learning_rate(const LearningRateSpec& lr, std::int64_t global) {
  if (lr.scaling == "none" || !lr.reference_global_batch || global <= 0) return lr.base;
  const double ratio = static_cast<double>(global) / static_cast<double>(*lr.reference_global_batch);
  return lr.scaling == "sqrt" ? lr.base * std::sqrt(ratio) : lr.base * ratio;
}

Plan replan(const Plan& plan, int instances) {
  Plan out = plan;
  Problems problems;
  size_plan(out, instances, true, problems);
  if (!problems.empty()) {
    std::string source = plan.spec.source.empty() ? std::string("job spec") : plan.spec.source.string();
    throw SpecError(source, std::move(problems));
  }
  return out;
}

bool starts_every_host(const Plan& plan) {
  const auto& h = plan.hosts;
  if (!h || plan.identity.field_sources.at("node_rank") == "flags") return false;
  return !(h->names.size() == 1 && h->this_host == 0);
}

Plan make_plan(const JobSpec& spec, const Overrides& given, const Environment& env) {
  Problems problems;
  Plan plan;
  plan.spec = spec;
  Overrides ov = given;  // with the per-node count that -H's slots or -n give
  detail::check_counts(spec, ov, problems);
  plan.identity = detail::discover_identity(spec, ov, env, problems);
  plan.warnings = plan.identity.warnings;
  plan.instances = plan.identity.instances;
  plan.min_instances = choose_min_instances(plan);
  detail::per_node_of_total(plan, ov, problems);
  place_workers(plan, ov, env, problems);
  number_ranks(plan, problems);
  plan_counts(plan, given, ov, problems);
  if (!ov.hosts.empty()) plan_hosts(plan, ov);
  else if (!ov.launch_agent.empty())
    problems.push_back({"--launch-agent", "names the command that reaches the hosts of -H or --hostfile, but no "
                                          "host is given; drop it or give the hosts"});
  if (plan_layout(plan, problems) && spec.has_batch) plan_batch(plan, problems);
  if (problems.empty()) plan_bubble(plan);
  check_elastic_sizes(plan, problems);
  choose_run_id(plan);
  choose_endpoint(plan, ov, problems);
  plan.token_source = token_source(plan, env);
  if (!problems.empty()) {
    std::string source = spec.source.empty() ? std::string("job spec") : spec.source.string();
    throw SpecError(source, std::move(problems));
  }
  return plan;
}

}  // namespace dtrain::config
