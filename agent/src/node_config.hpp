#pragma once
// This node's part of a multi-node job as data: how it reaches the rendezvous, what every node must
// agree on (the spec hash), the NodeSession options of a generation, and how the rank table of the
// join turns this node's plan into its share of the job. No sockets: tests/agent/test_node_config.cpp.
// spec_digest() is the one place that says what nodes must agree on, as named fields that the
// rendezvous compares one by one (the join request's spec_hash argument carries it), so that a
// mismatch names what differs.
#include <chrono>
#include <optional>
#include <string>

#include "dtrain/agent/agent.hpp"
#include "dtrain/common/net.hpp"
#include "dtrain/rendezvous/membership/etcd_membership.hpp"
#include "dtrain/rendezvous/membership/node_session.hpp"

namespace dtrain::agent {

struct NodeConfig {
  std::string endpoint;  // the rendezvous "host:port" as the plan names it
  net::HostPort ep;
  std::string run_id;
  std::string host;       // this node's name (rank tables, errors)
  std::string spec_hash;  // what every node must present: spec_digest()
  std::string token;
  bool insecure = false;
  int node_rank = -1;     // -1: not known before the join (the rendezvous assigns one)
  int slots = 1;          // local workers
  int instances = 1;           // elastic: the most
  int min_instances = 0;       // elastic: the fewest; 0: a fixed node count
  std::chrono::milliseconds last_call{30000};
  int master_port = 0;         // MASTER_PORT of every generation (--master-port, MASTER_PORT); 0: a free one
  std::string advertise_addr;  // node 0's MASTER_ADDR when given (--master-addr); "": its address
  std::chrono::milliseconds join_timeout{600000};
  std::chrono::milliseconds heartbeat{5000};
  std::chrono::milliseconds heartbeat_timeout{15000};
  std::chrono::milliseconds barrier_limit{0};  // how long the exit barrier waits for the slowest node
  std::optional<rdzv::EtcdSettings> etcd;      // rendezvous.backend "etcd" (paths made absolute)
  // "etcd at HOST:PORT" or the endpoint, for messages
  std::string where() const { return etcd ? "etcd at " + endpoint : endpoint; }
};

// Reads the plan (rendezvous endpoint and timings, run id, identity, max_runtime_s) and the token already resolved
// (rdzv::auth::resolve_token). Throws ConfigError for a malformed endpoint, or for a job without a
// token that spans several nodes or names a non-loopback endpoint, unless `insecure`.
NodeConfig node_config(const config::Plan& plan, bool insecure, std::string token);

// What every node must agree on, one "name=value" line per field: command, procs_per_instance,
// batch, parallel (the node count is compared on its own).
std::string spec_digest(const config::Plan& plan);

// The session of `generation` (its node rank: the one known before the join, or -1).
rdzv::NodeSessionOptions session_options(const NodeConfig& c, int generation);

// This node's plan for the generation a join's rank table describes: node rank, instances, world
// size, every rank, MASTER_ADDR; an elastic job's layout and batch plan recomputed for its size
// (config::replan). `base` is the plan before any join.
config::Plan plan_for(const config::Plan& base, const rdzv::JoinResult& r);

// The first join's rank table becomes this node's plan (plan_for) and store settings:
// MASTER_PORT, the rendezvous as the workers' store, the generation to start at, and a start that
// waits for the go of each generation.
void apply_rank_table(AgentOptions& o, const rdzv::JoinResult& r, const NodeConfig& c);

// A re-join must hand this node the same place in the job; throws ConfigError naming both.
void check_same_ranks(const rdzv::JoinReply& first, const rdzv::JoinResult& again);

}  // namespace dtrain::agent
