// The etcd backend's membership (rendezvous/membership/etcd/etcd_session.hpp) against a real etcd started by
// the test: the join barrier and its one table, refusals, job events and the root cause every node
// agrees on, a node whose lease ends, the exit barrier, and an elastic job that grows. Nodes are
// threads, each with its own EtcdSession and Client.
#include <doctest/doctest.h>

#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "dtrain/common/errors.hpp"
#include "etcd_server.hpp"
#include "etcd_session.hpp"
#include "../membership_test.hpp"

using namespace dtrain::etcd;
using namespace std::chrono_literals;
using dtrain::rdzv::Event;
using dtrain::rdzv::JoinResult;
using dtrain::rdzv::NodeSessionOptions;
using membership_test::Events;
using membership_test::join_all;

namespace {

NodeSessionOptions node_opts(const std::string& run, int instances, int rank, const std::string& host, int min = 0) {
  NodeSessionOptions o;
  o.store.run_id = run;
  o.host = host;
  o.node_rank = rank;
  o.slots = 2;
  o.instances = instances;
  o.min_instances = min;
  o.last_call = 300ms;
  o.spec_hash = "command=train\nprocs_per_instance=2";
  o.join_timeout = 20s;
  o.heartbeat_interval = 500ms;
  o.heartbeat_timeout = 2s;
  return o;
}

std::unique_ptr<EtcdSession> session(const etcdtest::EtcdServer& etcd, const NodeSessionOptions& o) {
  return std::make_unique<EtcdSession>(std::make_shared<Client>(etcd.options()), o);
}

// Three nodes of run `run` (node ranks 0-2 on hosts h0-h2), joined, node i's events going to ev[i]
// (declared by the caller before the sessions, which call into it until they end).
std::vector<std::unique_ptr<EtcdSession>> three_joined(const etcdtest::EtcdServer& etcd, const std::string& run,
                                                       std::vector<Events>& ev) {
  std::vector<std::unique_ptr<EtcdSession>> s;
  for (int i = 0; i < 3; ++i) s.push_back(session(etcd, node_opts(run, 3, i, fmt::format("h{}", i))));
  join_all(s);
  for (int i = 0; i < 3; ++i) s[i]->start_monitoring(ev[i].fn());
  return s;
}

}  // namespace

TEST_SUITE("etcd::session") {
  TEST_CASE("three nodes join through etcd and get one rank table; the exit barrier ends the run's keys") {
    etcdtest::EtcdServer etcd;
    REQUIRE_ETCD(etcd);
    std::vector<Events> ev(3);  // outlives the sessions, whose watchers call into it
    std::vector<std::unique_ptr<EtcdSession>> s;
    s.push_back(session(etcd, node_opts("r1", 3, 2, "h2")));
    s.push_back(session(etcd, node_opts("r1", 3, -1, "hx")));
    s.push_back(session(etcd, node_opts("r1", 3, 0, "h0")));
    auto r = join_all(s);
    CHECK(r[0].self.node_rank == 2);
    CHECK(r[1].self.node_rank == 1);
    CHECK(r[2].self.node_rank == 0);
    for (const auto& x : r) {
      CHECK(x.self.world_size == 6);
      CHECK(x.self.nnodes == 3);
      CHECK(x.self.master_addr == r[2].local_address);
      CHECK(x.self.master_port == r[0].self.master_port);
      CHECK(x.generation == 0);
      REQUIRE(x.table.size() == 3);
      CHECK(x.table[1].host == "hx");
    }
    CHECK(r[0].self.rank_offset == 4);
    for (int i = 0; i < 3; ++i) s[i]->start_monitoring(ev[i].fn());
    std::vector<std::future<std::optional<Event>>> done;
    for (auto& x : s) done.push_back(std::async(std::launch::async, [&x] { return x->finish(10s); }));
    for (auto& d : done) CHECK_FALSE(d.get().has_value());
    CHECK(Client(etcd.options()).range_prefix("/dtrain/r1/").kvs.empty());  // node 0 removed the run's keys
  }

  TEST_CASE("a failure reported by one node reaches every node, and all name the same root cause") {
    etcdtest::EtcdServer etcd;
    REQUIRE_ETCD(etcd);
    std::vector<Events> ev(3);
    auto s = three_joined(etcd, "r2", ev);
    s[1]->report_failure(3, 7, 0, "loss is NaN");
    s[2]->report_stop(130, 2, "interrupted (SIGINT)");
    for (int i = 0; i < 3; ++i) {
      auto e = ev[i].wait(10s, "failure");
      REQUIRE(e);
      CHECK(e->node == 1);
      CHECK(e->rank == 3);
      CHECK(e->exit_code == 7);
      CHECK(e->message == "loss is NaN");
      auto root = s[i]->root_cause();
      REQUIRE(root);
      CHECK(root->kind == "failure");
      CHECK(root->seq == e->seq);
    }
    CHECK(s[0]->finish(5s)->kind == "failure");  // the barrier cannot complete: the cause comes back
  }

  TEST_CASE("a node that goes away without finishing is lost once its lease ends; a node that finished is not") {
    etcdtest::EtcdServer etcd;
    REQUIRE_ETCD(etcd);
    std::vector<Events> ev(3);
    auto s = three_joined(etcd, "r3", ev);
    s[0].reset();  // node 0 gone (its lease revoked: as a lease that expires)
    for (int i = 1; i < 3; ++i) {
      auto e = ev[i].wait(10s, "lost");
      REQUIRE(e);
      CHECK(e->node == 0);
      CHECK(e->host == "h0");
    }
    CHECK_THROWS_AS(s[1]->finish(5s), dtrain::rdzv::NodeLostError);
  }

  TEST_CASE("a node of another job, and two nodes asking for one rank, are refused by name") {
    etcdtest::EtcdServer etcd;
    REQUIRE_ETCD(etcd);
    auto a = session(etcd, node_opts("r4", 2, 0, "a"));
    auto o = node_opts("r4", 2, 1, "b");
    o.spec_hash = "command=train\nprocs_per_instance=4";
    auto b = session(etcd, o);
    auto fa = std::async(std::launch::async, [&] { return a->join(); });
    std::this_thread::sleep_for(300ms);
    auto fb = std::async(std::launch::async, [&] { return b->join(); });
    CHECK_THROWS_WITH_AS(fb.get(), doctest::Contains("procs_per_instance"), dtrain::rdzv::JoinError);
    CHECK_THROWS_AS(fa.get(), dtrain::rdzv::JoinError);  // every joiner of the barrier is refused with it

    auto c = session(etcd, node_opts("r5", 2, 0, "c"));
    auto d = session(etcd, node_opts("r5", 2, 0, "d"));
    auto fc = std::async(std::launch::async, [&] { return c->join(); });
    std::this_thread::sleep_for(300ms);
    CHECK_THROWS_WITH_AS(d->join(), doctest::Contains("node rank 0"), dtrain::rdzv::JoinError);
    c->cancel_join();
    CHECK_THROWS_AS(fc.get(), dtrain::rdzv::Cancelled);
  }

  TEST_CASE("an elastic 2:3 job closes with two after the last call; a third node moves it to generation 1") {
    etcdtest::EtcdServer etcd;
    REQUIRE_ETCD(etcd);
    std::vector<Events> ev(2);  // outlives the sessions, whose watchers call into it
    std::vector<std::unique_ptr<EtcdSession>> s;
    for (int i = 0; i < 2; ++i) s.push_back(session(etcd, node_opts("r6", 3, -1, fmt::format("h{}", i), 2)));
    auto r = join_all(s);
    CHECK(r[0].self.nnodes == 2);
    CHECK(r[0].self.node_rank + r[1].self.node_rank == 1);
    for (int i = 0; i < 2; ++i) s[i]->start_monitoring(ev[i].fn());
    auto third = session(etcd, node_opts("r6", 3, -1, "h2", 2));
    auto f3 = std::async(std::launch::async, [&] { return third->join(); });
    for (int i = 0; i < 2; ++i) {
      auto e = ev[i].wait(10s, "joined");
      REQUIRE(e);
      CHECK(e->message.find("moves to generation 1 with 3 nodes") != std::string::npos);
    }
    std::vector<std::future<JoinResult>> again;
    for (auto& x : s) again.push_back(std::async(std::launch::async, [&x] { return x->rejoin(1); }));
    JoinResult j3 = f3.get();
    CHECK(j3.generation == 1);
    CHECK(j3.self.nnodes == 3);
    CHECK(j3.self.world_size == 6);
    for (auto& a : again) CHECK(a.get().self.nnodes == 3);
  }

  TEST_CASE("with etcd not there a join reports it unreachable and gives up after the join timeout") {
    etcdtest::EtcdServer etcd;
    REQUIRE_ETCD(etcd);
    etcd.kill();
    auto o = node_opts("r7", 2, 0, "h0");
    o.join_timeout = 2s;
    Options c = etcd.options();
    c.connect_timeout = 500ms;
    c.request_timeout = 500ms;
    EtcdSession s(std::make_shared<Client>(c), o);
    bool unreachable = false;
    auto t0 = std::chrono::steady_clock::now();
    CHECK_THROWS_WITH_AS(s.join([&](const dtrain::rdzv::JoinProgress& p) { unreachable |= !p.reachable; }),
                         doctest::Contains("not reachable"), dtrain::IoError);
    CHECK(unreachable);
    CHECK(std::chrono::steady_clock::now() - t0 < 10s);
  }
}
