// The etcd rendezvous backend end to end: `dtrain launch` processes of the real binary meet in an
// etcd started by the test (tests/rendezvous/etcd_server.hpp), their workers' collectives
// bootstrap from etcd, and node 0 can be lost without taking the job with it.
#include <doctest/doctest.h>

#include "../rendezvous/etcd_server.hpp"
#include "multinode_util.hpp"

using namespace mn;

namespace {

std::vector<std::string> etcd_args(const etcdtest::EtcdServer& etcd, const std::string& run,
                                   std::vector<std::string> more = {}) {
  std::vector<std::string> a{"--rdzv-backend", "etcd", "--rdzv-endpoint", etcd.endpoint(), "--rdzv-id", run, "--insecure"};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

// How many keys etcd holds under `prefix`.
std::size_t etcd_keys(const etcdtest::EtcdServer& etcd, const std::string& prefix) {
  return dtrain::etcd::Client(etcd.options()).range_prefix(prefix).kvs.size();
}

}  // namespace

TEST_SUITE("agent::multinode::etcd") {

TEST_CASE("two nodes meet in an etcd that wants client certificates; their workers' allreduce bootstraps from it") {
  etcdtest::EtcdServer etcd(etcdtest::EtcdServerOptions{true, {}});
  REQUIRE_ETCD(etcd);
  Job j(2, 2, fmt::format("exec '{}' --count 1000 --iters 2", allreduce_worker().string()));
  // no --insecure: TLS stands in for the token, for the agents and the workers alike
  auto args = [&](const std::string& ca) {
    return std::vector<std::string>{"--rdzv-backend", "etcd", "--rdzv-endpoint", etcd.endpoint(), "--rdzv-id", "etcd-tls",
                                    "--set", "/rendezvous/etcd/cacert=" + ca,
                                    "--set", "/rendezvous/etcd/cert=" + etcd.cert_file(),
                                    "--set", "/rendezvous/etcd/key=" + etcd.key_file()};
  };
  Node n0 = j.node(0, args(etcd.ca_file())), n1 = j.node(1, args(etcd.ca_file()));
  CHECK_MESSAGE(finish(n0, 60) == 0, err_of(n0));
  CHECK_MESSAGE(finish(n1, 60) == 0, err_of(n1));
  std::string out = agent_test::slurp(n0.out) + agent_test::slurp(n1.out);
  for (int r = 0; r < 4; ++r) CHECK_MESSAGE(out.find(fmt::format("rank {}/4 ok", r)) != std::string::npos, out);
  auto e = env_file(j.t.path / "env-3-0");
  CHECK(e["DTRAIN_STORE_ADDR"] == "etcd://" + etcd.endpoint());
  CHECK(e["DTRAIN_STORE_TOKEN"].empty());
  CHECK(e["DTRAIN_ETCD_CACERT"] == etcd.ca_file());
  CHECK(e["DTRAIN_ETCD_KEY"] == etcd.key_file());
  CHECK(etcd_keys(etcd, "/dtrain/etcd-tls/") == 0);  // node 0 removed them
  // a CA that did not sign etcd's certificate: refused by name, before any worker runs (77)
  Node bad = j.node(0, args(etcd.other_ca()));
  CHECK(finish(bad, 30) == 77);
  CHECK_MESSAGE(err_of(bad).find("TLS") != std::string::npos, err_of(bad));
}

TEST_CASE("under the etcd backend node 0's agent is killed mid-run: the other nodes of an elastic 2:4 job finish") {
  etcdtest::EtcdServer etcd;
  REQUIRE_ETCD(etcd);
  Job j(kElastic, 2, elastic_script(), kElasticExtra);
  auto args = etcd_args(etcd, "etcd-elastic", {"--set", "/rendezvous/last_call_s=3"});
  Node n0 = j.node(0, args), n1 = j.node(1, args), n2 = j.node(2, args);
  REQUIRE_MESSAGE(j.all_env(6, 0), err_of(n0));
  CHECK(env_file(j.t.path / "env-0-0")["DTRAIN_NODE_RANK"] == "0");  // n0 holds node rank 0
  ::kill(n0.pid, SIGKILL);
  CHECK(finish(n0, 10) == 128 + SIGKILL);
  check_went_on_with_two(j, n1, n2, 0);
  CHECK(j.no_workers_left());
}

TEST_CASE("under the etcd backend a fixed job that loses node 0 ends with 69 naming node 0, not the rendezvous") {
  etcdtest::EtcdServer etcd;
  REQUIRE_ETCD(etcd);
  Job j(2, 1, "exec sleep 60");
  Node n0 = j.node(0, etcd_args(etcd, "etcd-lost")), n1 = j.node(1, etcd_args(etcd, "etcd-lost"));
  REQUIRE_MESSAGE(j.all_env(2, 0), err_of(n1));
  ::kill(n0.pid, SIGKILL);
  CHECK(finish(n0, 10) == 128 + SIGKILL);
  CHECK(finish(n1, 30) == 69);
  std::string e1 = err_of(n1);
  CHECK_MESSAGE(e1.find("node 0 (") != std::string::npos, e1);
  CHECK_MESSAGE(e1.find("lost the rendezvous") == std::string::npos, e1);
  CHECK(j.no_workers_left());
}

TEST_CASE("a multi-node job at etcd with neither TLS nor etcd users is refused without --insecure (2)") {
  Job j(2, 1, "true");
  Node n = start(j.t, "node0", {j.job, "--node-rank", "0", "--no-progress", "--rdzv-backend", "etcd",
                                "--rdzv-endpoint", "127.0.0.1:2379"});
  CHECK(finish(n, 30) == 2);
  std::string e = err_of(n);
  CHECK_MESSAGE(e.find("neither TLS nor etcd authentication") != std::string::npos, e);
}
}
