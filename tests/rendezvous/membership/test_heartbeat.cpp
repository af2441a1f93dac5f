// Heartbeat against an in-process server: what each heartbeat carries reaches `dtrain status`'s
// questions, and a heartbeat that fails is the rendezvous lost.
#include <doctest/doctest.h>

#include <future>

#include "dtrain/rendezvous/membership/heartbeat.hpp"
#include "dtrain/rendezvous/membership/node_session.hpp"
#include "dtrain/rendezvous/membership/run_status.hpp"
#include "helpers.hpp"

using namespace rt;
using namespace dtrain::rdzv;

namespace {

// A job of one node, joined: its session connection is what a heartbeat goes over.
NodeSessionOptions one_node(const TestServer& srv) {
  NodeSessionOptions o;
  o.store = srv.client("job", 0);
  o.host = "h0";
  o.node_rank = 0;
  o.instances = 1;
  o.join_timeout = 20s;
  return o;
}

NodeStatus node0(const TestServer& srv) { return query_status(srv.client("job"), "job").nodes.at(0); }

}  // namespace

TEST_SUITE("rendezvous::heartbeat") {
  TEST_CASE("each heartbeat carries the node's state and worker counts; progress lines are stored") {
    TestServer srv;
    NodeSession node(one_node(srv));
    node.join();
    Heartbeat hb(20ms, 60s);
    hb.set_state("running", 2, 1, 3);
    hb.set_progress("rank 0: in allreduce #5");
    int lost = 0;
    hb.start(node.store(), 0, [&](const std::string&) { ++lost; });
    REQUIRE(wait_until([&] { return node0(srv).state == "running"; }));
    NodeStatus n = node0(srv);
    CHECK(n.running == 2);
    CHECK(n.exited == 1);
    CHECK(n.restarts == 3);
    auto progress = [&] { return query_progress(srv.client("job"), query_status(srv.client("job"), "job")).at(0); };
    REQUIRE(wait_until([&] { return progress() == "rank 0: in allreduce #5"; }));
    hb.set_state("stopping", 0, 2, 3);
    REQUIRE(wait_until([&] { return node0(srv).state == "stopping"; }));
    hb.stop();
    hb.stop();  // idempotent
    CHECK(lost == 0);
  }

  TEST_CASE("figures: this node's are stored, the other nodes' read back; a new start forgets them") {
    TestServer srv;
    NodeSession node(one_node(srv));
    node.join();
    node.store().set(figures_key(1), as_bytes(std::string("window\n1 10 2:5:100\n")));  // node 1's
    Heartbeat hb(20ms, 60s);
    hb.set_figures("window\n0 10 2:5:900\n", 3);  // a job of 3 nodes: node 2 shared nothing yet
    hb.start(node.store(), 0, [](const std::string&) {});
    REQUIRE(wait_until([&] { return !hb.peer_figures().empty(); }));
    auto peers = hb.peer_figures();
    CHECK(peers.size() == 1);
    CHECK(peers[1] == "window\n1 10 2:5:100\n");
    CHECK(to_string(node.store().get(figures_key(0), 5s)) == "window\n0 10 2:5:900\n");
    hb.stop();
    // started again (a new generation): what was read before is gone, what is there now comes in
    CHECK(node.store().erase(figures_key(1)));
    node.store().set(figures_key(2), as_bytes(std::string("window\n2 10 2:5:100\n")));
    hb.start(node.store(), 0, [](const std::string&) {});
    REQUIRE(wait_until([&] { return hb.peer_figures().count(2) == 1; }));
    CHECK(hb.peer_figures().count(1) == 0);
    hb.stop();
  }

  TEST_CASE("a heartbeat that fails is the rendezvous lost, once") {
    auto srv = std::make_unique<TestServer>();
    NodeSession node(one_node(*srv));
    node.join();
    Heartbeat hb(20ms, 60s);
    std::promise<std::string> lost;
    int calls = 0;
    hb.start(node.store(), 0, [&](const std::string& why) {
      if (++calls == 1) lost.set_value(why);
    });
    srv->server->stop();
    auto got = lost.get_future();
    REQUIRE(got.wait_for(30s) == std::future_status::ready);
    CHECK(got.get().find("heartbeat to the rendezvous failed") != std::string::npos);
    hb.stop();
    CHECK(calls == 1);
  }
}
