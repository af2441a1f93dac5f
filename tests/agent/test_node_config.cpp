// A multi-node job's settings as this node sees them: token policy, spec hash, session options, and
// the rank table turned into this node's plan.
#include <doctest/doctest.h>

#include <filesystem>

#include "dtrain/common/errors.hpp"
#include "node_config.hpp"

using namespace dtrain::agent;
using dtrain::ConfigError;
using std::chrono::milliseconds;
namespace config = dtrain::config;
namespace rdzv = dtrain::rdzv;

namespace {

config::Plan plan_of(int instances, int procs, const std::string& endpoint = "127.0.0.1:29400") {
  config::Plan p;
  p.spec.command = {"python3", "train.py"};
  p.instances = instances;
  p.procs_per_instance = procs;
  p.world_size = instances * procs;
  p.run_id = "run-1";
  p.rdzv_endpoint = endpoint;
  p.identity.host = "node-a";
  p.spec.rendezvous.join_timeout_s = 30;
  p.spec.rendezvous.heartbeat_s = 0.5;
  return p;
}

rdzv::JoinResult table_of_two() {
  rdzv::JoinResult r;
  r.self = {1, 2, 5, 2, 3, "10.0.0.1", 4100};  // node 1 of 2: ranks 2-4 of 5
  r.table = {{1, "b", "10.0.0.2", 3, 2}, {0, "a", "10.0.0.1", 2, 0}};
  r.local_address = "10.0.0.2";
  return r;
}

}  // namespace

TEST_SUITE("agent::node_config") {

TEST_CASE("what every node must agree on, field by field: the command, the cluster shape and the batch") {
  auto p = plan_of(2, 4);
  std::string h = spec_digest(p);
  CHECK(h.find("procs_per_instance=4\n") != std::string::npos);
  CHECK(h.find("batch=none\n") != std::string::npos);
  CHECK(h.find("\nparallel=pipeline 1 x tensor 1 x data ") != std::string::npos);
  CHECK(spec_digest(plan_of(2, 4)) == h);
  auto other = plan_of(2, 4);
  other.spec.command.push_back("--lr");
  CHECK(spec_digest(other) != h);
  CHECK(spec_digest(other).find(" --lr\n") != std::string::npos);
  CHECK(spec_digest(plan_of(2, 2)) != h);
  auto batch = plan_of(2, 4);
  batch.batch = config::BatchPlan{};
  batch.batch->global = 64;
  CHECK(spec_digest(batch).find("batch=global 64, micro_batches 1, epochs 1\n") != std::string::npos);
  auto env = plan_of(2, 4);
  env.spec.env["X"] = "1";  // not part of the agreement
  CHECK(spec_digest(env) == h);
  auto lng = plan_of(2, 4);
  lng.spec.command.push_back(std::string(500, 'x'));  // a long command: cut, with a hash of the whole
  std::string d = spec_digest(lng);
  CHECK(d.size() < 400);
  CHECK(d.find("... (") != std::string::npos);
}

TEST_CASE("a job across nodes needs a token unless insecure") {
  CHECK_THROWS_WITH_AS(node_config(plan_of(2, 1), false, ""), doctest::Contains("--insecure"), ConfigError);
  CHECK_THROWS_WITH_AS(node_config(plan_of(1, 1, "10.0.0.1:29400"), false, ""),
                       doctest::Contains("no token"), ConfigError);
  CHECK_NOTHROW(node_config(plan_of(2, 1), true, ""));
  CHECK_NOTHROW(node_config(plan_of(2, 1), false, "secret"));
  CHECK_NOTHROW(node_config(plan_of(1, 1), false, ""));  // one node on loopback
  CHECK_THROWS_WITH_AS(node_config(plan_of(2, 1, "nohostport"), false, "t"),
                       doctest::Contains("rendezvous endpoint"), ConfigError);
}

TEST_CASE("settings from the plan: endpoint, timings, node rank when it was given") {
  auto p = plan_of(2, 3);
  p.spec.rendezvous.heartbeat_timeout_s = 4;
  p.identity.node_rank = 1;
  NodeConfig c = node_config(p, false, "tok");
  CHECK(c.ep.host == "127.0.0.1");
  CHECK(c.ep.port == 29400);
  CHECK(c.host == "node-a");
  CHECK(c.node_rank == -1);  // a default node rank is not known: the rendezvous assigns one
  CHECK(c.join_timeout == milliseconds(30000));
  CHECK(c.heartbeat == milliseconds(500));
  CHECK(c.heartbeat_timeout == milliseconds(4000));
  CHECK(c.barrier_limit == std::chrono::hours(24 * 7));
  p.identity.field_sources["node_rank"] = "flags";
  p.spec.rendezvous.heartbeat_timeout_s.reset();
  p.spec.max_runtime_s = 60.0;
  c = node_config(p, false, "tok");
  CHECK(c.node_rank == 1);
  CHECK(c.heartbeat_timeout == milliseconds(1500));  // 3 x heartbeat_s
  CHECK(c.barrier_limit == milliseconds(60000 + 30000));

  rdzv::NodeSessionOptions so = session_options(c, 3);
  CHECK(so.store.host == "127.0.0.1");
  CHECK(so.store.port == 29400);
  CHECK(so.store.token == "tok");
  CHECK(so.store.run_id == "run-1");
  CHECK(so.store.generation == 3);
  CHECK(so.store.client_name == "agent node-a");
  CHECK(so.node_rank == 1);
  CHECK(so.slots == 3);
  CHECK(so.instances == 2);
  CHECK(so.spec_hash == c.spec_hash);
  CHECK(so.heartbeat_timeout == milliseconds(1500));
}

TEST_CASE("the rank table becomes this node's plan and store settings") {
  auto p = plan_of(2, 3);
  NodeConfig c = node_config(p, false, "tok");
  AgentOptions o;
  o.plan = p;
  o.embed_store = true;
  apply_rank_table(o, table_of_two(), c);
  CHECK(o.plan.identity.node_rank == 1);
  CHECK(o.plan.identity.instances == 2);
  CHECK(o.plan.identity.master_addr == "10.0.0.1");
  CHECK(o.plan.world_size == 5);
  REQUIRE(o.plan.ranks.size() == 5);
  for (int r = 0; r < 5; ++r) {
    CAPTURE(r);
    CHECK(o.plan.ranks[std::size_t(r)].rank == r);
    CHECK(o.plan.ranks[std::size_t(r)].node_rank == (r < 2 ? 0 : 1));
    CHECK(o.plan.ranks[std::size_t(r)].local_rank == (r < 2 ? r : r - 2));
  }
  CHECK_FALSE(o.embed_store);
  CHECK(o.store_addr == "127.0.0.1:29400");
  CHECK(o.store_token == "tok");
  CHECK(o.local_addr == "10.0.0.2");
  CHECK(o.master_port == 4100);
  CHECK(o.external_start);
  CHECK(config::plan_to_json(o.plan).find("\"world_size\": 5") != std::string::npos);
}

TEST_CASE("the etcd backend: TLS or etcd users instead of the token, absolute paths, and the workers' store in etcd") {
  auto p = plan_of(2, 3, "10.0.0.5:2379");
  p.spec.rendezvous.backend = "etcd";
  CHECK_THROWS_WITH_AS(node_config(p, false, "tok"), doctest::Contains("neither TLS nor etcd authentication"),
                       ConfigError);  // the dtrain token does not reach etcd
  CHECK_NOTHROW(node_config(p, true, ""));
  p.spec.rendezvous.etcd.cacert = "certs/ca.pem";
  NodeConfig c = node_config(p, false, "");
  REQUIRE(c.etcd);
  CHECK(c.where() == "etcd at 10.0.0.5:2379");
  CHECK(c.etcd->endpoint == "10.0.0.5:2379");
  CHECK(c.etcd->cacert == (std::filesystem::current_path() / "certs/ca.pem").string());
  CHECK(c.etcd->cert.empty());
  AgentOptions o;
  o.plan = p;
  apply_rank_table(o, table_of_two(), c);
  CHECK(o.store_addr == "etcd://10.0.0.5:2379");
  CHECK(o.store_token.empty());
  CHECK(o.store_env["DTRAIN_ETCD_CACERT"] == c.etcd->cacert);
  CHECK(o.store_env.count("DTRAIN_ETCD_PASSWORD_FILE") == 1);
}

TEST_CASE("a re-join must give this node the same place in the job") {
  rdzv::JoinResult first = table_of_two();
  rdzv::JoinResult again = first;
  again.generation = 1;
  again.self.master_port = 4200;  // a fresh port is expected
  CHECK_NOTHROW(check_same_ranks(first.self, again));
  again.self.rank_offset = 0;
  CHECK_THROWS_WITH_AS(check_same_ranks(first.self, again),
                       doctest::Contains("generation 1: the rank table changed (node 1 offset 0 world 5, was node 1 "
                                         "offset 2 world 5)"),
                       ConfigError);
}

}  // TEST_SUITE
