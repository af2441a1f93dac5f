// The job spec's checks that span several fields, and torchrun's flags applied to it (spec.cpp runs
// them after the field-by-field walk).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/net.hpp"
#include "dtrain/config/fields.hpp"
#include "dtrain/config/instance_types.hpp"
#include "spec_internal.hpp"

namespace dtrain::config::detail {

using json = nlohmann::json;

namespace {

// torchrun's --rdzv-endpoint may leave the port out: 29400 then.
std::string with_default_port(const std::string& ep) {
  bool bracketed = !ep.empty() && ep.front() == '[';
  bool has_port = bracketed ? ep.find("]:") != std::string::npos
                            : (ep.find(':') != std::string::npos && ep.find(':') == ep.rfind(':'));
  bool bare_v6 = !bracketed && ep.find(':') != ep.rfind(':');
  if (has_port || ep.empty()) return ep;
  return bare_v6 ? fmt::format("[{}]:29400", ep) : ep + ":29400";
}

}  // namespace

void check_combinations(const json& doc, const JobSpec& spec, Collector& c) {
  auto has = [&](const char* ptr) { return doc.contains(json::json_pointer(ptr)); };
  if (spec.cluster.gpus_per_instance && spec.cluster.procs_per_instance)
    c.add("/cluster/procs_per_instance",
          fmt::format("{} conflicts with /cluster/gpus_per_instance {}; give gpus_per_instance for GPU workers or "
                      "procs_per_instance for CPU workers, not both",
                      *spec.cluster.procs_per_instance, *spec.cluster.gpus_per_instance));
  if (const InstanceType* t = spec.cluster.instance_type ? find_instance_type(*spec.cluster.instance_type) : nullptr) {
    // gpus_per_instance may use fewer GPUs than the instance has, not more; CPU workers contradict it
    if (spec.cluster.gpus_per_instance && *spec.cluster.gpus_per_instance > t->gpus)
      c.add("/cluster/gpus_per_instance",
            fmt::format("{} is more than the {} GPUs of /cluster/instance_type \"{}\"; give at most {}, or leave it out "
                        "to use them all", *spec.cluster.gpus_per_instance, t->gpus, *spec.cluster.instance_type, t->gpus));
    if (spec.cluster.procs_per_instance)
      c.add("/cluster/procs_per_instance",
            fmt::format("{} CPU workers conflicts with /cluster/instance_type \"{}\", which gives {} GPU workers per "
                        "instance; give one of them", *spec.cluster.procs_per_instance, *spec.cluster.instance_type,
                        t->gpus));
  }
  if (const auto& lr = spec.batch.learning_rate; lr && doc.contains("batch") && doc.at("batch").is_object() &&
                                                   doc.at("batch").contains("learning_rate") &&
                                                   doc.at("batch").at("learning_rate").is_object()) {
    if (!has("/batch/learning_rate/base"))
      c.add("/batch/learning_rate/base", "missing; the learning rate needs its base rate, e.g. \"base\": 0.1");
    if (!lr->reference_global_batch && lr->scaling != "none" && has("/batch/learning_rate/base"))
      c.add("/batch/learning_rate/reference_global_batch",
            fmt::format("missing; scaling \"{}\" scales base from the global batch it was tuned at, e.g. "
                        "\"reference_global_batch\": 256 (or \"scaling\": \"none\")", lr->scaling));
  }
  if (spec.has_batch && doc.at("batch").is_object()) {
    const auto& b = spec.batch;
    if (!has("/batch/per_replica") && !has("/batch/global"))
      c.add("/batch", "gives neither per_replica nor global; set one of them, e.g. \"per_replica\": 32");
    if (b.per_replica && has("/batch/micro_batches") && *b.per_replica % b.micro_batches != 0)
      c.add("/batch/per_replica", fmt::format("{} does not divide by micro_batches {}; micro-batch size must be a whole "
                                              "number", *b.per_replica, b.micro_batches));
    else if (b.per_replica && b.micro_batches > *b.per_replica)
      c.add("/batch/micro_batches", fmt::format("{} is more than per_replica {}", b.micro_batches, *b.per_replica));
  }
  if (spec.rendezvous.heartbeat_timeout_s && *spec.rendezvous.heartbeat_timeout_s <= spec.rendezvous.heartbeat_s)
    c.add("/rendezvous/heartbeat_timeout_s",
          fmt::format("{} is not longer than heartbeat_s {}; a node would be declared lost between two heartbeats",
                      *spec.rendezvous.heartbeat_timeout_s, spec.rendezvous.heartbeat_s));
  if (spec.rendezvous.join_timeout_s < spec.rendezvous.heartbeat_s && has("/rendezvous/join_timeout_s"))
    c.add("/rendezvous/join_timeout_s", fmt::format("{} is shorter than heartbeat_s {}", spec.rendezvous.join_timeout_s,
                                                    spec.rendezvous.heartbeat_s));
}

void apply_flags(JobSpec& spec, const Overrides& o, Collector& c) {
  for (const auto& p : o.flag_problems) c.add(p.path, p.message);
  if (o.nodes && (*o.nodes < 1 || *o.nodes > 65536))
    c.add("--nnodes", fmt::format("{} is out of range; expected a node count from 1 to 65536", *o.nodes));
  if (o.node_rank && *o.node_rank < 0)
    c.add("--node-rank", fmt::format("{} is negative; expected a node rank from 0 to nodes-1", *o.node_rank));
  if (o.nodes && o.node_rank && *o.nodes >= 1 && *o.node_rank >= *o.nodes)
    c.add("--node-rank", fmt::format("{} is not below --nnodes {}; node ranks run from 0 to {}", *o.node_rank, *o.nodes,
                                     *o.nodes - 1));
  if (o.nproc_per_node && (*o.nproc_per_node < 1 || *o.nproc_per_node > 4096))
    c.add("--nproc-per-node", fmt::format("{} is out of range; expected a worker count from 1 to 4096", *o.nproc_per_node));
  if (o.standalone && ((o.nodes && *o.nodes > 1) || o.rdzv))
    c.add("--standalone", fmt::format("runs one node with a rendezvous of its own, but {} is given too; drop one",
                                      o.rdzv ? "--rdzv-endpoint " + *o.rdzv : fmt::format("--nnodes {}", *o.nodes)));
  if (o.standalone) spec.rendezvous.endpoint.reset();
  if (o.rdzv) {
    std::string ep = with_default_port(*o.rdzv);
    try {
      (void)net::parse_host_port(ep, "--rdzv-endpoint");
      spec.rendezvous.endpoint = ep;
    } catch (const ConfigError& e) {
      std::string msg = e.what();
      if (msg.rfind("--rdzv-endpoint: ", 0) == 0) msg.erase(0, 17);
      c.add("--rdzv-endpoint", msg);
    }
  }
  if (o.run_id) {
    std::vector<SpecProblem> bad;
    if (o.run_id->empty()) bad.push_back({"--rdzv-id", "empty; expected a run id, e.g. job-42"});
    else if (const FieldInfo* f = find_field("/rendezvous/run_id"); f != nullptr && f->check) f->check(*o.run_id, "--rdzv-id", bad);
    for (auto& p : bad) c.add(p.path, std::move(p.message));
    if (bad.empty()) spec.rendezvous.run_id = *o.run_id;
  }
  if (o.master_addr && o.master_addr->empty())
    c.add("--master-addr", "empty; expected node 0's host name or address");
  if (o.master_port && (*o.master_port < 1 || *o.master_port > 65535))
    c.add("--master-port", fmt::format("{} is out of range; expected a TCP port from 1 to 65535", *o.master_port));
  if (o.max_restarts) {
    if (*o.max_restarts < 0 || *o.max_restarts > 10000)
      c.add("--max-restarts", fmt::format("{} is out of range; expected 0 to 10000", *o.max_restarts));
    else
      spec.restart.max_restarts = *o.max_restarts;
  }
  if (o.token_file) {
    if (o.token_file->empty()) c.add("--token-file", "empty path; expected the file that holds the rendezvous token");
    else spec.rendezvous.token_file = *o.token_file;
  }
  if (o.rdzv_backend) spec.rendezvous.backend = *o.rdzv_backend;
}

void check_etcd(const JobSpec& spec, Collector& c) {
  const auto& r = spec.rendezvous;
  const auto& e = r.etcd;
  if (r.backend != "etcd") {
    if (e.tls() || e.user || e.password_file)
      c.add("/rendezvous/etcd", "is set, but rendezvous.backend is \"builtin\"; set \"backend\": \"etcd\" "
                                "(or --rdzv-backend etcd), or drop it");
    return;
  }
  if (!r.endpoint)
    c.add("/rendezvous/endpoint", "unset, but rendezvous.backend is \"etcd\"; set it (or --rdzv-endpoint) to "
                                  "HOST:PORT of an etcd member, e.g. 10.0.0.5:2379");
  if (e.cert.has_value() != e.key.has_value())
    c.add(e.cert ? "/rendezvous/etcd/key" : "/rendezvous/etcd/cert",
          "missing; a client certificate needs both cert and key");
  if (e.user.has_value() != e.password_file.has_value())
    c.add(e.user ? "/rendezvous/etcd/password_file" : "/rendezvous/etcd/user",
          "missing; etcd authentication needs both user and password_file");
}

}  // namespace dtrain::config::detail
