// EventWatch against an in-process server: a job event reaches the watcher's JobEvents at once, and
// a server that goes away is the rendezvous lost.
#include <doctest/doctest.h>

#include "dtrain/rendezvous/membership/event_watch.hpp"
#include "dtrain/rendezvous/membership/node_session.hpp"
#include "helpers.hpp"
#include "membership_test.hpp"

using namespace rt;
using namespace dtrain::rdzv;
using membership_test::Events;
using membership_test::join_all;

TEST_SUITE("rendezvous::event_watch") {
  TEST_CASE("a failure reported by a node reaches the watcher; the server stopping is the rendezvous lost") {
    auto srv = std::make_unique<TestServer>();
    std::vector<std::unique_ptr<NodeSession>> nodes;
    for (int i = 0; i < 2; ++i) {
      NodeSessionOptions o;
      o.store = srv->client("job", 0);
      o.host = "h" + std::to_string(i);
      o.node_rank = i;
      o.instances = 2;
      o.join_timeout = 20s;
      o.heartbeat_timeout = 0ms;  // nobody heartbeats here
      nodes.push_back(std::make_unique<NodeSession>(o));
    }
    join_all(nodes);
    Events sink;  // outlives the watch, which calls into it
    JobEvents events;
    events.set_handler(sink.fn());
    EventWatch watch(events);
    watch.start(srv->client("job", 0));
    nodes[1]->report_failure(3, 7, 0, "boom");
    auto failure = sink.wait(30s, "failure");
    REQUIRE(failure);
    CHECK(failure->node == 1);
    CHECK(failure->rank == 3);
    CHECK(events.last_seq() == failure->seq);
    CHECK(events.root()->seq == failure->seq);

    srv->server->stop();
    auto lost = sink.wait(30s, "lost");
    REQUIRE(lost);
    CHECK(lost->node == -1);
    CHECK(lost->host == fmt::format("127.0.0.1:{}", srv->port()));
    CHECK(lost->message.find("lost the connection to the rendezvous") != std::string::npos);
    watch.stop();
  }
}
