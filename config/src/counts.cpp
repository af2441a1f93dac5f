// mpirun's counts against torchrun's and the spec's: -n/-np (the world size), the slots of
// -H/--hosts/--hostfile, and -ppn (as --nproc-per-node). They fill in what the others leave open
// and are refused where they contradict them.
#include <set>

#include <fmt/format.h>

#include "dtrain/config/instance_types.hpp"
#include "identity_internal.hpp"

namespace dtrain::config::detail {
namespace {

// The node count the command line or the spec gives (not the environment's), with its name.
std::optional<std::pair<int, std::string>> given_nodes(const JobSpec& spec, const Overrides& ov) {
  if (!ov.hosts.empty()) return std::pair{static_cast<int>(ov.hosts.size()), ov.hosts_from};
  if (!spec.cluster.instances) return std::nullopt;
  const FlagSet* f = ov.flag_for("/cluster/instances");
  int n = *spec.cluster.instances;
  return std::pair{n, f != nullptr ? fmt::format("{} {}", f->flag, n) : fmt::format("cluster.instances {} (job spec)", n)};
}

// The workers per node the flags or the spec give, with their name.
std::optional<std::pair<int, std::string>> declared_per_node(const JobSpec& spec, const Overrides& ov) {
  if (ov.nproc_per_node) return std::pair{*ov.nproc_per_node, fmt::format("--nproc-per-node {}", *ov.nproc_per_node)};
  const auto& cl = spec.cluster;
  if (cl.gpus_per_instance)
    return std::pair{*cl.gpus_per_instance, fmt::format("cluster.gpus_per_instance {} (job spec)", *cl.gpus_per_instance)};
  if (cl.procs_per_instance)
    return std::pair{*cl.procs_per_instance,
                     fmt::format("cluster.procs_per_instance {} (job spec)", *cl.procs_per_instance)};
  if (const InstanceType* t = cl.instance_type ? find_instance_type(*cl.instance_type) : nullptr)
    return std::pair{t->gpus, fmt::format("cluster.instance_type {} ({} GPUs, job spec)", *cl.instance_type, t->gpus)};
  return std::nullopt;
}

// One slot count for every host: the hosts' own, which the flags and the spec must not contradict.
void check_slots(const JobSpec& spec, Overrides& ov, Problems& out) {
  std::set<int> counts;
  std::string first;
  for (const auto& h : ov.hosts) {
    if (!h.slots) continue;
    if (counts.insert(*h.slots).second && counts.size() == 2) {
      out.push_back({ov.hosts_from, fmt::format("{} and {}:{} have different slot counts, but dtrain runs the same "
                                                "number of workers on every node; give every host the same count",
                                                first, h.name, *h.slots)});
      return;
    }
    if (first.empty()) first = fmt::format("{}:{}", h.name, *h.slots);
  }
  if (counts.empty()) return;
  const int slots = *counts.begin();
  if (auto p = declared_per_node(spec, ov); p && p->first != slots) {
    out.push_back({ov.hosts_from, fmt::format("gives {} workers per host, but {} says {}; drop one or make them agree",
                                              slots, p->second, p->first)});
    return;
  }
  if (ov.nproc_mode) {
    out.push_back({ov.hosts_from, fmt::format("gives {} workers per host, but --nproc-per-node {} counts them here; "
                                              "drop one", slots, *ov.nproc_mode)});
    return;
  }
  ov.nproc_per_node = slots;
}

}  // namespace

std::optional<std::pair<int, std::string>> given_per_node(const JobSpec& spec, const Overrides& ov) {
  for (const auto& h : ov.hosts)
    if (h.slots) return std::pair{*h.slots, ov.hosts_from};
  return declared_per_node(spec, ov);
}

void check_counts(const JobSpec& spec, Overrides& ov, Problems& out) {
  if (!ov.hosts.empty()) check_slots(spec, ov, out);
  if (!ov.total_ranks) return;
  const int total = *ov.total_ranks;
  auto nodes = given_nodes(spec, ov);
  auto per_node = given_per_node(spec, ov);
  if (spec.cluster.min_instances) {
    const FlagSet* f = ov.flag_for("/cluster/instances");
    out.push_back({"-n", fmt::format("{} fixes the world size, but {} makes the job elastic; drop one", total,
                                     f != nullptr ? f->flag : std::string("cluster.instances {min, max} (job spec)"))});
  } else if (nodes && per_node && static_cast<long long>(nodes->first) * per_node->first != total) {
    const long long world = static_cast<long long>(nodes->first) * per_node->first;
    if (nodes->second == per_node->second)  // both from the hosts' slots
      out.push_back({"-n", fmt::format("{} disagrees with the {} slots of {}; drop one or make them agree", total, world,
                                       nodes->second)});
    else
      out.push_back({"-n", fmt::format("{} disagrees with {} x {} = {} workers; drop one or make them agree", total,
                                       nodes->second, per_node->second, world)});
  } else if (per_node && total % per_node->first != 0) {
    out.push_back({"-n", fmt::format("{} does not divide by the {} workers per node of {}; give a multiple of {}", total,
                                     per_node->first, per_node->second, per_node->first)});
  }
}

std::optional<Sourced> nodes_of_total(const JobSpec& spec, const Overrides& ov) {
  auto per_node = given_per_node(spec, ov);
  if (!ov.total_ranks || !per_node || *ov.total_ranks % per_node->first != 0) return std::nullopt;
  return Sourced{*ov.total_ranks / per_node->first, "flags", "-n",
                 fmt::format("{} with {}", *ov.total_ranks, per_node->second)};
}

void per_node_of_total(const Plan& plan, Overrides& ov, Problems& out) {
  if (!ov.total_ranks || given_per_node(plan.spec, ov) || ov.nproc_mode) return;
  const int total = *ov.total_ranks;
  if (total % plan.instances != 0) {
    out.push_back({"-n", fmt::format("{} does not divide by the {} nodes of {}; give a multiple of {}", total,
                                     plan.instances, plan.identity.field_sources.at("instances"), plan.instances)});
    return;
  }
  ov.nproc_per_node = total / plan.instances;
}

}  // namespace dtrain::config::detail
