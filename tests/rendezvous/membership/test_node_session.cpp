// Node coordination over real loopback sockets: join barrier and rank table, named join errors,
// timeouts that name the missing nodes, heartbeats and lost nodes, failure fan-out, restarts under
// a new generation, exit barrier and status. Nodes are threads, each with its own NodeSession.
#include <doctest/doctest.h>

#include <algorithm>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/net.hpp"
#include "dtrain/rendezvous/membership/node_session.hpp"
#include "dtrain/rendezvous/membership/run_status.hpp"
#include "helpers.hpp"
#include "membership_test.hpp"

using namespace rt;
using namespace dtrain::rdzv;
using membership_test::Events;
using membership_test::join_all;
using dtrain::IoError;
using dtrain::TimeoutError;

namespace {

NodeSessionOptions node_opts(const TestServer& srv, int instances, int rank, const std::string& host, int slots = 2) {
  NodeSessionOptions o;
  o.store = srv.client("job", 0);
  o.host = host;
  o.node_rank = rank;
  o.slots = slots;
  o.instances = instances;
  o.spec_hash = "hash-1";
  o.join_timeout = 20s;
  o.heartbeat_interval = 100ms;
  o.heartbeat_timeout = 1500ms;
  return o;
}

}  // namespace

TEST_SUITE("rendezvous::node_session") {
  TEST_CASE("join barrier hands every node the rank table") {
    TestServer srv;
    std::vector<std::unique_ptr<NodeSession>> s;
    s.push_back(std::make_unique<NodeSession>(node_opts(srv, 4, 2, "h2", 3)));
    s.push_back(std::make_unique<NodeSession>(node_opts(srv, 4, -1, "hx", 1)));
    s.push_back(std::make_unique<NodeSession>(node_opts(srv, 4, 0, "h0", 2)));
    auto o = node_opts(srv, 4, 3, "h3", 4);
    s.push_back(std::make_unique<NodeSession>(o));
    auto r = join_all(s);
    // node 1 is the one without a fixed rank
    CHECK(r[0].self.node_rank == 2);
    CHECK(r[1].self.node_rank == 1);
    CHECK(r[2].self.node_rank == 0);
    CHECK(r[3].self.node_rank == 3);
    for (auto& x : r) {
      CHECK(x.self.nnodes == 4);
      CHECK(x.self.world_size == 10);
      CHECK(x.self.master_addr == "127.0.0.1");
      CHECK(x.self.master_port == r[0].self.master_port);
      CHECK(x.self.master_port > 0);
      REQUIRE(x.table.size() == 4);
      CHECK(x.local_address == "127.0.0.1");
    }
    CHECK(r[2].self.rank_offset == 0);
    CHECK(r[1].self.rank_offset == 2);
    CHECK(r[0].self.rank_offset == 3);
    CHECK(r[3].self.rank_offset == 6);
    CHECK(r[0].table[1].host == "hx");
    CHECK(r[0].table[3].slots == 4);

    auto st = query_status(srv.client("job"), "job");
    CHECK(st.closed);
    CHECK(st.world_size == 10);
    REQUIRE(st.nodes.size() == 4);
    CHECK(st.nodes[0].host == "h0");
    CHECK(st.nodes[3].state == "joined");
    auto runs = list_runs(srv.client(""));
    CHECK(std::find(runs.begin(), runs.end(), "job") != runs.end());
  }

  TEST_CASE("named join errors") {
    TestServer srv;
    std::unique_ptr<NodeSession> first;
    std::future<JoinResult> fut;
    auto start_first = [&] {
      first = std::make_unique<NodeSession>(node_opts(srv, 2, 0, "h0"));
      fut = std::async(std::launch::async, [&] { return first->join(); });
      // wait until node 0 is in
      for (int i = 0; i < 200; ++i) {
        if (query_status(srv.client("job"), "job").joined == 1) break;
        std::this_thread::sleep_for(20ms);
      }
    };
    start_first();
    // nodes of different jobs cannot become one: the waiting node is refused with the same message
    auto first_refused_too = [&](const char* what) {
      try {
        fut.get();
        FAIL("node 0's join succeeded");
      } catch (const JoinError& e) {
        CHECK(e.code == wire::ErrorCode::spec_mismatch);
        CHECK(std::string(e.what()).find(what) != std::string::npos);
      }
      start_first();
    };
    SUBCASE("duplicate node rank") {
      NodeSession dup(node_opts(srv, 2, 0, "h0b"));
      CHECK_THROWS_WITH_AS(dup.join(), doctest::Contains("duplicate node rank 0"), JoinError);
    }
    SUBCASE("different instance count") {
      NodeSession bad(node_opts(srv, 3, 1, "h1"));
      CHECK_THROWS_WITH_AS(bad.join(), doctest::Contains("spec mismatch"), JoinError);
      first_refused_too("host h1 expects 3 nodes");
    }
    SUBCASE("different spec hash") {
      auto o = node_opts(srv, 2, 1, "h1");
      o.spec_hash = "hash-2";
      NodeSession bad(o);
      try {
        bad.join();
        FAIL("join succeeded");
      } catch (const JoinError& e) {
        CHECK(e.code == wire::ErrorCode::spec_mismatch);
        CHECK(std::string(e.what()).find("'hash-2' on node 1 (h1)") != std::string::npos);
      }
      first_refused_too("'hash-1' on node 0 (h0)");
    }
    NodeSession second(node_opts(srv, 2, 1, "h1"));
    auto r1 = second.join();
    auto r0 = fut.get();
    CHECK(r0.self.node_rank == 0);
    CHECK(r1.self.node_rank == 1);
    // the barrier is closed: one more node is one too many
    NodeSession extra(node_opts(srv, 2, -1, "h9"));
    try {
      extra.join();
      FAIL("join succeeded");
    } catch (const JoinError& e) {
      CHECK(e.code == wire::ErrorCode::too_many_nodes);
      CHECK(std::string(e.what()).find("host h9 is one too many") != std::string::npos);
    }
    // a node rank outside the job is refused before anything is sent
    CHECK_THROWS_WITH_AS(NodeSession(node_opts(srv, 2, 5, "h5")), doctest::Contains("out of range"), dtrain::ConfigError);
  }

  TEST_CASE("join timeout names the missing nodes, with live progress") {
    TestServer srv;
    std::vector<std::string> lines;
    std::mutex mu;
    auto run = [&](int rank, std::string host) {
      auto o = node_opts(srv, 3, rank, host);
      o.join_timeout = 1600ms;
      NodeSession s(o);
      try {
        s.join([&](const JoinProgress& p) {
          std::lock_guard lock(mu);
          lines.push_back(p.line());
        });
        return std::string("joined");
      } catch (const TimeoutError& e) {
        return std::string(e.what());
      }
    };
    auto a = std::async(std::launch::async, run, 0, "h0");
    auto b = std::async(std::launch::async, run, 1, "h1");
    std::string ea = a.get(), eb = b.get();
    // The first node to time out sees both others' state; the second sees one node fewer.
    const std::string& first = ea.find("2 of 3") != std::string::npos ? ea : eb;
    const std::string& second = &first == &ea ? eb : ea;
    MESSAGE(first);
    MESSAGE(second);
    CHECK(first.find("join timed out after 1.6 s: 2 of 3 nodes joined; missing: node 2 (joined: node") != std::string::npos);
    CHECK(first.find("node 0 on h0") != std::string::npos);
    CHECK(first.find("node 1 on h1") != std::string::npos);
    CHECK(second.find("1 of 3 nodes joined") != std::string::npos);
    CHECK(second.find("node 2") != std::string::npos);
    std::lock_guard lock(mu);
    REQUIRE_FALSE(lines.empty());
    CHECK(lines.front().find("waiting for nodes 2/3 (missing: node 2)") != std::string::npos);
    CHECK(lines.front().find("/ 1 s") != std::string::npos);
  }

  TEST_CASE("a silent agent is declared lost and every agent hears it") {
    TestServer srv;
    std::vector<std::unique_ptr<NodeSession>> s;
    for (int i = 0; i < 3; ++i) s.push_back(std::make_unique<NodeSession>(node_opts(srv, 3, i, "h" + std::to_string(i))));
    join_all(s);
    Events e0, e1;
    s[0]->start_monitoring(e0.fn());
    s[1]->start_monitoring(e1.fn());
    // node 2 never heartbeats
    auto ev = e0.wait(15s);
    REQUIRE(ev);
    CHECK(ev->kind == "lost");
    CHECK(ev->node == 2);
    CHECK(ev->host == "h2");
    CHECK(ev->message.find("no heartbeat") != std::string::npos);
    CHECK(ev->root_cause);
    auto ev1 = e1.wait(15s);
    REQUIRE(ev1);
    CHECK(ev1->node == 2);
    CHECK(s[0]->root_cause()->node == 2);
    auto st = query_status(srv.client("job"), "job");
    CHECK(st.nodes[2].state == "lost");
    CHECK(st.root_cause.find("node 2 (h2) lost") != std::string::npos);
  }

  TEST_CASE("a killed agent (connection closed) is lost at once") {
    TestServer srv;
    std::vector<std::unique_ptr<NodeSession>> s;
    for (int i = 0; i < 2; ++i) {
      auto o = node_opts(srv, 2, i, "h" + std::to_string(i));
      o.heartbeat_timeout = 0ms;  // only the closed connection can reveal it
      s.push_back(std::make_unique<NodeSession>(o));
    }
    join_all(s);
    Events e0;
    s[0]->start_monitoring(e0.fn());
    s[1].reset();
    auto ev = e0.wait(15s);
    REQUIRE(ev);
    CHECK(ev->kind == "lost");
    CHECK(ev->node == 1);
    CHECK(ev->message.find("closed") != std::string::npos);
  }

  TEST_CASE("a failure stops every node, then all re-join under generation g+1") {
    TestServer srv;
    std::vector<std::unique_ptr<NodeSession>> s;
    for (int i = 0; i < 3; ++i) s.push_back(std::make_unique<NodeSession>(node_opts(srv, 3, i, "h" + std::to_string(i))));
    join_all(s);
    s[0]->store().set("nccl/id", as_bytes("gen0"));
    std::vector<Events> ev(3);
    for (int i = 0; i < 3; ++i) s[std::size_t(i)]->start_monitoring(ev[std::size_t(i)].fn());
    s[1]->set_local_state("running", 2, 0, 0);
    s[1]->report_failure(3, 7, 0, "Traceback: boom");
    for (auto& e : ev) {
      auto got = e.wait(15s);
      REQUIRE(got);
      CHECK(got->kind == "failure");
      CHECK(got->node == 1);
      CHECK(got->rank == 3);
      CHECK(got->exit_code == 7);
      CHECK(got->root_cause);
      CHECK(describe_event(*got) == "node 1 (h1): rank 3 exited with code 7: Traceback: boom");
    }
    std::vector<std::future<JoinResult>> fs;
    for (auto& x : s) fs.push_back(std::async(std::launch::async, [&x] { return x->rejoin(1); }));
    for (auto& f : fs) {
      auto r = f.get();
      CHECK(r.generation == 1);
      CHECK(r.self.world_size == 6);
    }
    CHECK_THROWS_AS(s[2]->store().get("nccl/id", 200ms), TimeoutError);
    CHECK_FALSE(s[0]->root_cause().has_value());
    CHECK(query_status(srv.client("job"), "job").generation == 1);
  }

  TEST_CASE("exit barrier") {
    TestServer srv;
    std::vector<std::unique_ptr<NodeSession>> s;
    for (int i = 0; i < 3; ++i) s.push_back(std::make_unique<NodeSession>(node_opts(srv, 3, i, "h" + std::to_string(i))));
    join_all(s);
    for (auto& x : s) x->start_monitoring({});
    SUBCASE("everyone finishes") {
      std::vector<std::future<void>> fs;
      for (auto& x : s) fs.push_back(std::async(std::launch::async, [&x] { x->finish(20s); }));
      for (auto& f : fs) CHECK_NOTHROW(f.get());
      auto st = query_status(srv.client("job"), "job");
      for (auto& n : st.nodes) CHECK(n.state == "done");
      s.clear();  // disconnects after the exit barrier are not losses
      CHECK(query_status(srv.client("job"), "job").root_cause.empty());
    }
    SUBCASE("a node that never finishes is named") {
      auto f0 = std::async(std::launch::async, [&] { s[0]->finish(800ms); });
      auto f1 = std::async(std::launch::async, [&] { s[1]->finish(800ms); });
      CHECK_THROWS_WITH_AS(f0.get(), doctest::Contains("node 2 (h2)"), TimeoutError);
      CHECK_THROWS_AS(f1.get(), TimeoutError);
    }
  }
}

TEST_SUITE("rendezvous::node_session") {
  TEST_CASE("a server stopping under waiting joiners tells them who was missing") {
    auto srv = std::make_unique<TestServer>();
    NodeSession s(node_opts(*srv, 3, 1, "h1"));
    auto fut = std::async(std::launch::async, [&] { s.join(); });
    for (int i = 0; i < 200; ++i) {
      if (query_status(srv->client("job"), "job").joined == 1) break;
      std::this_thread::sleep_for(20ms);
    }
    srv->server->stop();
    CHECK_THROWS_WITH_AS(fut.get(), doctest::Contains("1 of 3 nodes joined; missing: node 0, node 2"), IoError);
  }

}

TEST_SUITE("rendezvous::node_session") {
  TEST_CASE("exit barrier: a failure on another node ends the wait at once with that event") {
    TestServer srv;
    std::vector<std::unique_ptr<NodeSession>> s;
    for (int i = 0; i < 3; ++i) s.push_back(std::make_unique<NodeSession>(node_opts(srv, 3, i, "h" + std::to_string(i))));
    join_all(s);
    for (auto& x : s) x->start_monitoring({});
    auto t0 = std::chrono::steady_clock::now();
    auto f0 = std::async(std::launch::async, [&] { return s[0]->finish(20s); });
    std::this_thread::sleep_for(200ms);  // node 0 waits in the barrier
    s[1]->report_failure(4, 5, 0, "late boom");
    auto cause = f0.get();
    CHECK(std::chrono::steady_clock::now() - t0 < 10s);
    REQUIRE(cause.has_value());
    CHECK(cause->kind == "failure");
    CHECK(cause->node == 1);
    CHECK(cause->rank == 4);
    CHECK(cause->exit_code == 5);
    // a node that calls finish() after the failure does not wait either
    auto cause2 = s[2]->finish(20s);
    REQUIRE(cause2.has_value());
    CHECK(cause2->node == 1);
  }

  TEST_CASE("exit barrier: a node lost while waiting is named by a NodeLostError") {
    TestServer srv;
    std::vector<std::unique_ptr<NodeSession>> s;
    for (int i = 0; i < 2; ++i) {
      auto o = node_opts(srv, 2, i, "h" + std::to_string(i));
      o.heartbeat_timeout = 0ms;  // only the closed connection reveals it
      s.push_back(std::make_unique<NodeSession>(o));
    }
    join_all(s);
    for (auto& x : s) x->start_monitoring({});
    auto f0 = std::async(std::launch::async, [&] { return s[0]->finish(20s); });
    std::this_thread::sleep_for(200ms);
    s[1].reset();  // the agent dies without finishing
    try {
      f0.get();
      FAIL("finish returned");
    } catch (const NodeLostError& e) {
      CHECK(e.node == 1);
      CHECK(e.host == "h1");
      CHECK(std::string(e.what()).find("node 1 (h1) lost") != std::string::npos);
    }
  }

  TEST_CASE("exit barrier: the rendezvous going away is a NodeLostError for node -1") {
    auto srv = std::make_unique<TestServer>();
    std::vector<std::unique_ptr<NodeSession>> s;
    for (int i = 0; i < 2; ++i) s.push_back(std::make_unique<NodeSession>(node_opts(*srv, 2, i, "h" + std::to_string(i))));
    join_all(s);
    for (auto& x : s) x->start_monitoring({});
    auto f0 = std::async(std::launch::async, [&] { return s[0]->finish(20s); });
    std::this_thread::sleep_for(200ms);
    srv->server->stop();
    try {
      f0.get();
      FAIL("finish returned");
    } catch (const NodeLostError& e) {
      CHECK(e.node == -1);
      CHECK(e.host == fmt::format("127.0.0.1:{}", srv->port()));
    }
  }

  TEST_CASE("cancel_join ends a join waiting for missing nodes, and every later join") {
    TestServer srv;
    NodeSession s(node_opts(srv, 3, 0, "h0"));
    auto t0 = std::chrono::steady_clock::now();
    auto fut = std::async(std::launch::async, [&] { s.join(); });
    for (int i = 0; i < 200; ++i) {
      if (query_status(srv.client("job"), "job").joined == 1) break;
      std::this_thread::sleep_for(20ms);
    }
    s.cancel_join();
    CHECK_THROWS_AS(fut.get(), Cancelled);
    CHECK(std::chrono::steady_clock::now() - t0 < 10s);
    CHECK_THROWS_AS(s.rejoin(1), Cancelled);
  }

  TEST_CASE("cancel_join ends a join still retrying to connect") {
    int port = dtrain::net::pick_free_port("127.0.0.1");  // nothing listens there
    NodeSessionOptions o;
    o.store.host = "127.0.0.1";
    o.store.port = port;
    o.store.run_id = "job";
    o.host = "h0";
    o.node_rank = 0;
    o.instances = 2;
    o.join_timeout = 20s;
    NodeSession s(o);
    auto t0 = std::chrono::steady_clock::now();
    auto fut = std::async(std::launch::async, [&] { s.join(); });
    std::this_thread::sleep_for(300ms);
    s.cancel_join();
    CHECK_THROWS_WITH_AS(fut.get(), doctest::Contains("cancelled"), Cancelled);
    CHECK(std::chrono::steady_clock::now() - t0 < 5s);
  }

  TEST_CASE("cancel_join leaves an established membership usable; rejoin keeps the assigned node rank") {
    TestServer srv;
    std::vector<std::unique_ptr<NodeSession>> s;
    s.push_back(std::make_unique<NodeSession>(node_opts(srv, 2, -1, "ha")));
    s.push_back(std::make_unique<NodeSession>(node_opts(srv, 2, -1, "hb")));
    auto r = join_all(s);
    std::vector<std::future<JoinResult>> fs;
    for (auto& x : s) fs.push_back(std::async(std::launch::async, [&x] { return x->rejoin(1); }));
    for (std::size_t i = 0; i < 2; ++i) {
      auto again = fs[i].get();
      CHECK(again.generation == 1);
      CHECK(again.self.node_rank == r[i].self.node_rank);
      CHECK(again.self.rank_offset == r[i].self.rank_offset);
    }
    s[0]->cancel_join();
    for (auto& x : s) x->start_monitoring({});
    std::vector<std::future<std::optional<Event>>> done;
    for (auto& x : s) done.push_back(std::async(std::launch::async, [&x] { return x->finish(20s); }));
    for (auto& f : done) CHECK_FALSE(f.get().has_value());
  }

  TEST_CASE("a long-lived server forgets a finished run: the same job can run again") {
    TestServer srv;
    for (int round = 0; round < 3; ++round) {
      CAPTURE(round);
      std::vector<std::unique_ptr<NodeSession>> sessions;
      for (int r = 0; r < 2; ++r) sessions.push_back(std::make_unique<NodeSession>(node_opts(srv, 2, r, "n" + std::to_string(r))));
      auto results = join_all(sessions);  // the third round was refused as "one too many" before
      CHECK(results[1].self.world_size == 4);
      CHECK(list_runs(srv.client("", 0)) == std::vector<std::string>{"job"});
      std::vector<std::future<void>> done;
      for (auto& s : sessions) done.push_back(std::async(std::launch::async, [&s] { s->finish(10s); }));
      for (auto& d : done) d.get();
      sessions.clear();
      // the run is gone once its last connection closed (the server notices within a moment)
      std::vector<std::string> runs;
      for (int i = 0; i < 100; ++i) {
        runs = list_runs(srv.client("", 0));
        if (runs.empty()) break;
        std::this_thread::sleep_for(20ms);
      }
      CHECK(runs.empty());
    }
  }
}
