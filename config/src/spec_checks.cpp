// The job spec's checks that span several fields, and what --standalone does to it (spec.cpp runs
// them after the field-by-field walk).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dtrain/common/errors.hpp"
#include "dtrain/config/fields.hpp"
#include "dtrain/config/instance_types.hpp"
#include "spec_internal.hpp"

namespace dtrain::config::detail {

using json = nlohmann::json;

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

void apply_standalone(JobSpec& spec, const Overrides& o, Collector& c) {
  if (!o.standalone) return;
  if (const FlagSet* ep = o.flag_for("/rendezvous/endpoint"))
    c.add("--standalone", fmt::format("runs one node with a rendezvous of its own, but {} {} is given too; drop one",
                                      ep->flag, spec.rendezvous.endpoint.value_or("")));
  else if (o.hosts.size() > 1)
    c.add("--standalone", fmt::format("runs one node with a rendezvous of its own, but {} is given too; drop one",
                                      o.hosts_from));
  else if (int n = spec.cluster.instances.value_or(1); n > 1)
    c.add("--standalone", fmt::format("runs one node with a rendezvous of its own, but {} is given too; drop one",
                                      o.flag_for("/cluster/instances") != nullptr
                                          ? fmt::format("{} {}", o.flag_for("/cluster/instances")->flag, n)
                                          : fmt::format("cluster.instances {} (job spec)", n)));
  spec.rendezvous.endpoint.reset();  // the spec's endpoint is not this launch's
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

namespace dtrain::config {

const FlagSet* Overrides::flag_for(std::string_view pointer) const {
  const FlagSet* out = nullptr;
  for (const auto& f : flag_sets)
    if (f.pointer == pointer) out = &f;  // the last one counts
  return out;
}

}  // namespace dtrain::config
