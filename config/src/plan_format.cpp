// The two faces of a plan: the JSON object of `dtrain plan --json` (and the DTRAIN_PLAN file) and
// the human summary with the parallel groups and the rank table.
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "dtrain/common/text.hpp"
#include "dtrain/config/plan.hpp"

namespace dtrain::config {
namespace {

using json = nlohmann::json;

constexpr GroupKind kKinds[] = {GroupKind::tensor, GroupKind::pipeline, GroupKind::data};

json parallel_json(const Plan& plan) {
  const Layout& l = plan.layout;
  json groups;
  for (GroupKind k : kKinds) groups[group_kind_name(k)] = l.groups(k);
  return {{"pipeline", l.pipeline}, {"tensor", l.tensor},   {"data", l.data},
          {"order", l.order_text()}, {"schedule", plan.schedule}, {"groups", std::move(groups)},
          {"bubble", plan.pipeline_bubble ? json(*plan.pipeline_bubble) : json(nullptr)}};
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

// Where the launch's rendezvous token comes from (Plan::token_source).
std::string token_text(const Plan& plan) {
  const auto& src = plan.token_source;
  if (src == "file") return "token from " + plan.spec.rendezvous.token_file.value_or("");
  if (src == "DTRAIN_RDZV_TOKEN") return "token from DTRAIN_RDZV_TOKEN";
  if (src == "launch") return "a token this launch makes, sent to each host on its launch agent's standard input";
  if (src == "store") return "a token the store makes for this node's workers";
  return "no token";
}

json rendezvous_json(const Plan& plan) {
  const auto& s = plan.spec;
  json r;
  r["endpoint"] = plan.rdzv_endpoint.empty() ? json(nullptr) : json(plan.rdzv_endpoint);
  r["source"] = plan.rdzv_source;
  r["join_timeout_s"] = s.rendezvous.join_timeout_s;
  r["heartbeat_s"] = s.rendezvous.heartbeat_s;
  r["heartbeat_timeout_s"] = s.rendezvous.heartbeat_timeout_s.value_or(3 * s.rendezvous.heartbeat_s);
  r["token_file"] = s.rendezvous.token_file ? json(*s.rendezvous.token_file) : json(nullptr);
  r["token"] = plan.token_source.empty() ? json(nullptr) : json(plan.token_source);
  r["last_call_s"] = s.rendezvous.last_call_s;
  r["backend"] = s.rendezvous.backend;
  if (s.rendezvous.backend == "etcd") {
    const auto& e = s.rendezvous.etcd;
    auto opt = [](const std::optional<std::string>& v) { return v ? json(*v) : json(nullptr); };
    r["etcd"] = {{"cacert", opt(e.cacert)}, {"cert", opt(e.cert)}, {"key", opt(e.key)}, {"user", opt(e.user)},
                 {"password_file", opt(e.password_file)}};
  }
  return r;
}

// -H/--hosts/--hostfile: each host with its node rank and workers; null without them.
json host_list_json(const Plan& plan) {
  if (!plan.hosts) return nullptr;
  const HostsPlan& h = *plan.hosts;
  json nodes = json::array();
  for (std::size_t i = 0; i < h.names.size(); ++i)
    nodes.push_back({{"host", h.names[i]}, {"node_rank", i}, {"slots", plan.procs_per_instance}});
  return {{"from", h.from}, {"this_host", h.this_host >= 0 ? json(h.this_host) : json(nullptr)},
          {"launch_agent", h.launch_agent}, {"hosts", std::move(nodes)}};
}

json batch_json(const Plan& plan) {
  const auto& s = plan.spec;
  if (!plan.batch) return nullptr;
  const auto& b = *plan.batch;
  auto opt = [](const std::optional<std::int64_t>& v) { return v ? json(*v) : json(nullptr); };
  json j = {{"global", b.global},
            {"per_replica", b.per_replica},
            {"micro_batches", b.micro_batches},
            {"micro_batch_size", b.micro_batch_size},
            {"dataset_size", opt(b.dataset_size)},
            {"epochs", b.epochs},
            {"iterations_per_epoch", opt(b.iterations_per_epoch)},
            {"total_iterations", opt(b.total_iterations)},
            {"last_batch", opt(b.last_batch)},
            {"learning_rate", b.learning_rate ? json(*b.learning_rate) : json(nullptr)},
            {"warmup_iterations", b.warmup_iterations}};
  if (const auto& lr = s.batch.learning_rate)
    j["learning_rate_spec"] = {
        {"base", lr->base},
        {"reference_global_batch", lr->reference_global_batch ? json(*lr->reference_global_batch) : json(nullptr)},
        {"scaling", lr->scaling}};
  return j;
}

// One "key        value" line of plan_to_text.
struct Row {
  std::string& out;
  void operator()(std::string_view key, const std::string& value) const { out += fmt::format("{:<12}{}\n", key, value); }
};

// The batch lines of plan_to_text: the batch math, a partial last batch, the learning rate.
void batch_rows(const Plan& plan, const Row& row) {
  const auto& s = plan.spec;
  if (!plan.batch) return row("batch", "none (the spec has no batch section)");
  const auto& b = *plan.batch;
  row("batch", fmt::format("global {} = {} replicas x per-replica {}", b.global, plan.layout.data, b.per_replica));
  row("", fmt::format("{} micro-batch{} of {}", b.micro_batches, b.micro_batches == 1 ? "" : "es", b.micro_batch_size));
  if (b.dataset_size)
    row("", fmt::format("{} samples: {} iterations per epoch x {} epoch{} = {} iterations", *b.dataset_size,
                        *b.iterations_per_epoch, b.epochs, b.epochs == 1 ? "" : "s", *b.total_iterations));
  if (b.last_batch)
    row("", fmt::format("{} samples do not divide by the global batch {}: the last iteration of each epoch has {} "
                        "sample{} ({} full iterations before it); the workers decide whether to run or drop it",
                        *b.dataset_size, b.global, *b.last_batch, *b.last_batch == 1 ? "" : "s",
                        *b.iterations_per_epoch - 1));
  if (b.learning_rate) {
    const auto& lr = *s.batch.learning_rate;
    std::string how = lr.scaling == "none" || !lr.reference_global_batch
                          ? fmt::format("base {} (scaling none)", lr.base)
                          : fmt::format("base {} x {}({} / {})", lr.base, lr.scaling == "sqrt" ? "sqrt" : "",
                                        b.global, *lr.reference_global_batch);
    row("learning", fmt::format("rate {:.6g} = {}{}", *b.learning_rate, how,
                                     b.warmup_iterations > 0 ? fmt::format(", warm-up {} iterations", b.warmup_iterations)
                                                             : std::string()));
  }
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
  j["min_instances"] = plan.min_instances;
  j["procs_per_instance"] = plan.procs_per_instance;
  j["local_world_size"] = plan.procs_per_instance;
  j["node_rank"] = plan.identity.node_rank;
  j["use_gpus"] = plan.use_gpus;
  j["bind_gpus"] = s.cluster.bind_gpus;
  j["cpu_bind"] = s.cluster.cpu_bind;
  j["slots_source"] = plan.slots_source;
  j["instance_type"] = plan.instance_type.empty() ? json(nullptr) : json(plan.instance_type);
  j["master_addr"] = plan.identity.master_addr;
  j["master_port"] = plan.identity.master_port ? json(*plan.identity.master_port) : json(nullptr);
  j["host"] = plan.identity.host;
  j["hosts"] = plan.identity.hosts;
  j["host_list"] = host_list_json(plan);
  j["identity_source"] = plan.identity.source;
  j["identity_sources"] = plan.identity.field_sources;
  j["rendezvous"] = rendezvous_json(plan);
  j["restart"] = {{"max_restarts", s.restart.max_restarts},
                  {"backoff_s", s.restart.backoff_s},
                  {"checkpoint_dir", s.restart.checkpoint_dir ? json(*s.restart.checkpoint_dir) : json(nullptr)}};
  j["env"] = s.env;
  j["output"] = {{"tag", s.output.tag},
                 {"tag_format", s.output.tag_format},
                 {"timestamps", s.output.timestamps},
                 {"straggler_share", s.output.straggler_share},
                 {"log_dir", s.output.log_dir ? json(*s.output.log_dir) : json(nullptr)}};
  j["grace_s"] = s.grace_s;
  j["max_runtime_s"] = s.max_runtime_s ? json(*s.max_runtime_s) : json(nullptr);
  j["batch"] = batch_json(plan);
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
  Row row{out};
  std::string cmd;
  for (const auto& a : s.command) {
    if (!cmd.empty()) cmd += ' ';
    bool quote = a.empty() || a.find_first_of(" \t\"'$\\") != std::string::npos;
    cmd += quote ? "'" + a + "'" : a;
  }
  row("job", fmt::format("{} (run id {}, {})", s.name, plan.run_id, plan.run_id_source));
  if (!s.source.empty()) row("spec", s.source.string());
  row("command", cmd);
  if (!plan.python.empty()) row("python", fmt::format("{} ({})", plan.python, plan.python_source));
  row("cluster", fmt::format("{} instance{} x {} {} = world size {}", plan.instances, plan.instances == 1 ? "" : "s",
                             plan.procs_per_instance,
                             plan.use_gpus ? (plan.procs_per_instance == 1 ? "GPU worker" : "GPU workers")
                                           : (plan.procs_per_instance == 1 ? "CPU worker" : "CPU workers"),
                             plan.world_size));
  row("", fmt::format("workers per instance from {}; CPU binding {}", plan.slots_source, s.cluster.cpu_bind));
  if (plan.elastic())
    row("", fmt::format("elastic: {} to {} instances (world size {} to {}); the join barrier closes {} s after {} "
                        "joined, or at once with {}; a node lost or added starts a new generation",
                        plan.min_instances, plan.instances, plan.min_instances * plan.procs_per_instance,
                        plan.world_size, s.rendezvous.last_call_s, plan.min_instances, plan.instances));
  std::string me = fmt::format("node rank {} of {}", id.node_rank, plan.instances);
  if (!id.host.empty()) me += ", host " + id.host;
  if (plan.hosts && plan.hosts->this_host < 0)
    me = fmt::format("host {}, not one of the hosts (the ranks below are node {}'s)", id.host, id.node_rank);
  row("this node", me);
  std::string srcs;
  for (const auto& [k, v] : id.field_sources) srcs += fmt::format("{}{}={}", srcs.empty() ? "" : ", ", k, v);
  row("identity", fmt::format("{} ({})", id.source, srcs));
  row("master", id.master_addr + (id.master_port ? fmt::format(":{}", *id.master_port) : std::string()));
  if (plan.hosts) {
    row("hosts", fmt::format("{} ({} node{}, node ranks in this order, {} worker{} each; from {})",
                             text::join(plan.hosts->names, " "), plan.hosts->names.size(),
                             plan.hosts->names.size() == 1 ? "" : "s", plan.procs_per_instance,
                             plan.procs_per_instance == 1 ? "" : "s", plan.hosts->from));
    row("", "launch agent " + text::join(plan.hosts->launch_agent, " ") + " (what reaches each host)");
  } else if (!id.hosts.empty()) {
    std::vector<std::string> shown(id.hosts.begin(), id.hosts.begin() + static_cast<long>(std::min<std::size_t>(id.hosts.size(), 8)));
    row("hosts", text::join(shown, " ") + (id.hosts.size() > 8 ? fmt::format(" ... ({} in all)", id.hosts.size()) : ""));
  }
  row("rendezvous", plan.rdzv_endpoint.empty() ? std::string("standalone store on this node (loopback)")
                                               : fmt::format("{}{} ({})", s.rendezvous.backend == "etcd" ? "etcd at " : "",
                                                             plan.rdzv_endpoint, plan.rdzv_source));
  row("", fmt::format("join timeout {} s, heartbeat every {} s, lost after {} s, {}", s.rendezvous.join_timeout_s,
                      s.rendezvous.heartbeat_s, s.rendezvous.heartbeat_timeout_s.value_or(3 * s.rendezvous.heartbeat_s),
                      token_text(plan)));
  if (!plan.layout.data_only()) out += parallel_text(plan);
  if (plan.pipeline_bubble)
    row("bubble", fmt::format("(p-1)/(m+p-1) = {}/{} = {:.1f}% of each iteration a stage waits", plan.layout.pipeline - 1,
                              (plan.batch ? plan.batch->micro_batches : s.batch.micro_batches) + plan.layout.pipeline - 1,
                              100 * *plan.pipeline_bubble));
  batch_rows(plan, row);
  row("restarts", fmt::format("{} (backoff {} s), grace {} s{}", s.restart.max_restarts, s.restart.backoff_s, s.grace_s,
                              s.max_runtime_s ? fmt::format(", max runtime {} s", *s.max_runtime_s) : std::string()));
  if (s.output.log_dir) row("logs", *s.output.log_dir + "/" + plan.run_id + "/attempt-N/rank-R.{out,err}");
  if (s.restart.checkpoint_dir) row("checkpoints", *s.restart.checkpoint_dir + " (DTRAIN_CHECKPOINT_DIR)");
  if (!s.env.empty()) {
    std::string e;
    for (const auto& [k, v] : s.env) e += fmt::format("{}{}={}", e.empty() ? "" : " ", k, v);
    row("env", e);
  }
  out += rank_table(plan);
  return out;
}


}  // namespace dtrain::config
