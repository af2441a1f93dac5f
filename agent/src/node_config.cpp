// NodeConfig (node_config.hpp): a multi-node job's settings as this node sees them.
#include "node_config.hpp"

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "dtrain/common/errors.hpp"
#include "dtrain/agent/multinode.hpp"
#include "dtrain/common/text.hpp"

namespace dtrain::agent {
namespace {

using std::chrono::milliseconds;

milliseconds seconds_ms(double s) { return milliseconds(static_cast<std::int64_t>(s * 1000.0 + 0.5)); }

std::string host_name(const config::Plan& plan) {
  if (!plan.identity.host.empty()) return plan.identity.host;
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) == 0 && buf[0] != '\0') return buf;
  return "localhost";
}

std::string absolute(const std::optional<std::string>& path) {
  return path ? std::filesystem::absolute(*path).lexically_normal().string() : std::string();
}

// The spec's etcd fields, with paths made absolute (the workers run in the job's workdir).
rdzv::EtcdSettings etcd_settings(const config::Plan& plan) {
  const auto& e = plan.spec.rendezvous.etcd;
  rdzv::EtcdSettings s;
  s.endpoint = plan.rdzv_endpoint;
  s.cacert = absolute(e.cacert);
  s.cert = absolute(e.cert);
  s.key = absolute(e.key);
  s.user = e.user.value_or("");
  s.password_file = absolute(e.password_file);
  return s;
}

// The dtrain token does not reach etcd: there, TLS or etcd's own users keep other jobs out.
void check_etcd_security(const config::Plan& plan, const rdzv::EtcdSettings& s, bool insecure) {
  auto ep = net::parse_host_port(s.endpoint, "rendezvous endpoint");
  if (!insecure && !s.tls() && s.user.empty() && (plan.instances > 1 || !net::is_loopback_host(ep.host)))
    throw ConfigError(fmt::format(
        "this job meets at etcd {} with neither TLS nor etcd authentication; set rendezvous.etcd.cacert (https) "
        "or rendezvous.etcd.user and password_file, or pass --insecure on a trusted network",
        s.endpoint));
}

}  // namespace

std::string spec_digest(const config::Plan& p) {
  constexpr std::size_t kShown = 200;  // a longer command is shown cut, with its hash
  std::string cmd;
  for (const auto& a : p.spec.command) cmd += (cmd.empty() ? "" : " ") + (a.find(' ') == std::string::npos ? a : "'" + a + "'");
  if (cmd.size() > kShown) cmd = fmt::format("{}... ({:016x})", cmd.substr(0, kShown), text::fnv1a(cmd));
  std::string d = fmt::format("command={}\nprocs_per_instance={}\n", cmd, p.procs_per_instance);
  d += p.batch ? fmt::format("batch=global {}, micro_batches {}, epochs {}\n", p.batch->global, p.batch->micro_batches,
                             p.batch->epochs)
               : std::string("batch=none\n");
  const auto& l = p.layout;
  d += fmt::format("parallel=pipeline {} x tensor {} x data {}, {}, {}", l.pipeline, l.tensor, l.data, l.order_text(),
                   p.schedule);
  return d;
}

NodeConfig node_config(const config::Plan& plan, bool insecure, std::string token) {
  const auto& rs = plan.spec.rendezvous;
  NodeConfig c;
  c.endpoint = plan.rdzv_endpoint;
  c.ep = net::parse_host_port(c.endpoint, "rendezvous endpoint");
  c.run_id = plan.run_id;
  c.host = host_name(plan);
  c.spec_hash = spec_digest(plan);
  c.token = std::move(token);
  c.insecure = insecure;
  c.slots = plan.procs_per_instance;
  c.instances = plan.instances;
  c.min_instances = plan.elastic() ? plan.min_instances : 0;
  c.last_call = seconds_ms(rs.last_call_s);
  c.join_timeout = seconds_ms(rs.join_timeout_s);
  c.heartbeat = seconds_ms(rs.heartbeat_s);
  c.heartbeat_timeout = seconds_ms(rs.heartbeat_timeout_s.value_or(3 * rs.heartbeat_s));
  // as long as the slowest node may run: a failure or a lost node ends the wait sooner
  const auto& max_runtime_s = plan.spec.max_runtime_s;
  c.barrier_limit = max_runtime_s ? seconds_ms(*max_runtime_s) + c.join_timeout
                                  : std::chrono::duration_cast<milliseconds>(std::chrono::hours(24 * 7));

  auto src = plan.identity.field_sources.find("node_rank");
  bool rank_known = src != plan.identity.field_sources.end() && src->second != "default";
  c.node_rank = rank_known ? plan.identity.node_rank : -1;
  c.master_port = plan.identity.master_port.value_or(0);
  if (c.node_rank == 0 && plan.identity.field_sources.count("master_addr") != 0 &&
      plan.identity.field_sources.at("master_addr") == "flags")
    c.advertise_addr = plan.identity.master_addr;

  if (rs.backend == "etcd") c.etcd = etcd_settings(plan);
  check_token(plan, c.token, insecure);
  return c;
}

void check_token(const config::Plan& plan, const std::string& token, bool insecure) {
  if (plan.spec.rendezvous.backend == "etcd") return check_etcd_security(plan, etcd_settings(plan), insecure);
  auto ep = net::parse_host_port(plan.rdzv_endpoint, "rendezvous endpoint");
  if (token.empty() && !insecure && (plan.instances > 1 || !net::is_loopback_host(ep.host)))
    throw ConfigError(fmt::format(
        "this job spans {} node(s) through the rendezvous {} but has no token; set rendezvous.token_file, "
        "--token-file FILE or DTRAIN_RDZV_TOKEN (the same on every node), or pass --insecure on a trusted network",
        plan.instances, plan.rdzv_endpoint));
}

rdzv::NodeSessionOptions session_options(const NodeConfig& c, int generation) {
  rdzv::NodeSessionOptions so;
  so.store.host = c.ep.host;
  so.store.port = c.ep.port;
  so.store.token = c.token;
  so.store.run_id = c.run_id;
  so.store.generation = generation;
  so.store.connect_timeout = c.join_timeout;
  so.store.client_name = fmt::format("agent {}", c.host);
  so.host = c.host;
  so.node_rank = c.node_rank;
  so.slots = c.slots;
  so.instances = c.instances;
  so.min_instances = c.min_instances;
  so.last_call = c.last_call;
  so.spec_hash = c.spec_hash;
  so.master_port = c.master_port;
  so.advertise_addr = c.advertise_addr;
  so.join_timeout = c.join_timeout;
  so.heartbeat_interval = c.heartbeat;
  so.heartbeat_timeout = c.heartbeat_timeout;
  return so;
}

config::Plan plan_for(const config::Plan& base, const rdzv::JoinResult& r) {
  config::Plan p = base.elastic() ? config::replan(base, r.self.nnodes) : base;
  p.identity.node_rank = r.self.node_rank;
  p.identity.instances = r.self.nnodes;
  p.identity.master_addr = r.self.master_addr;
  p.instances = r.self.nnodes;
  p.world_size = r.self.world_size;
  p.ranks.clear();
  for (const auto& n : r.table)
    for (int l = 0; l < n.slots; ++l) p.ranks.push_back({n.rank_offset + l, n.node_rank, l});
  std::sort(p.ranks.begin(), p.ranks.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  return p;
}

void apply_rank_table(AgentOptions& o, const rdzv::JoinResult& r, const NodeConfig& c) {
  o.plan = plan_for(o.plan, r);
  o.first_generation = r.generation;
  o.embed_store = false;
  o.store_addr = c.endpoint;
  o.store_token = c.token;
  if (c.etcd) {
    o.store_addr = rdzv::etcd_store_addr(*c.etcd);
    o.store_token.clear();
    for (auto& [k, v] : rdzv::etcd_worker_env(*c.etcd)) o.store_env[k] = std::move(v);
  }
  o.local_addr = r.local_address;
  o.master_port = r.self.master_port;
  o.external_start = true;
}

void check_same_ranks(const rdzv::JoinReply& first, const rdzv::JoinResult& r) {
  if (r.self.node_rank != first.node_rank || r.self.rank_offset != first.rank_offset ||
      r.self.world_size != first.world_size)
    throw ConfigError(fmt::format("generation {}: the rank table changed (node {} offset {} world {}, was node {} "
                                  "offset {} world {})",
                                  r.generation, r.self.node_rank, r.self.rank_offset, r.self.world_size,
                                  first.node_rank, first.rank_offset, first.world_size));
}

}  // namespace dtrain::agent
