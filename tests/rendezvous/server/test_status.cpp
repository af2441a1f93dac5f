// STATUS records without sockets.
#include <doctest/doctest.h>

#include "status.hpp"

using namespace dtrain::rdzv;
using namespace std::chrono_literals;

TEST_SUITE("rendezvous::server::status") {
  TEST_CASE("nodes sorted by node rank, heartbeat ages, the root cause described") {
    JoinBarrier j;
    for (int rank : {2, 0}) {
      JoinRequest r;
      r.host = "h" + std::to_string(rank);
      r.requested = rank;
      r.slots = 2;
      r.instances = 3;
      r.master_port = 29500;
      j.add(r, "10.0.0." + std::to_string(rank));
    }
    EventLog events(1);
    auto now = Clock::now();
    auto open = run_status("job", 1, j, events, now);
    CHECK(open.run_id == "job");
    CHECK(open.generation == 1);
    CHECK(open.instances == 3);
    CHECK(open.joined == 2);
    CHECK_FALSE(open.closed);
    REQUIRE(open.nodes.size() == 2);
    CHECK(open.nodes[0].node_rank == 0);  // the asked-for rank while open
    CHECK(open.nodes[1].node_rank == 2);
    CHECK(open.nodes[0].state == "joining");
    CHECK(open.root_cause.empty());

    JoinRequest last;
    last.host = "h1";
    last.slots = 2;
    last.instances = 3;
    j.add(last, "10.0.0.1");
    j.close(now);
    Event e;
    e.node = 1;
    e.host = "h1";
    e.rank = 3;
    e.exit_code = 7;
    events.append(EventKind::failure, e);
    auto st = run_status("job", 1, j, events, now + 1500ms);
    CHECK(st.closed);
    CHECK(st.world_size == 6);
    CHECK(st.master_addr == "10.0.0.0");
    CHECK(st.master_port == 29500);
    REQUIRE(st.nodes.size() == 3);
    CHECK(st.nodes[1].host == "h1");
    CHECK(st.nodes[1].heartbeat_age_ms == 1500);
    CHECK(st.root_cause == "node 1 (h1): rank 3 exited with code 7");
  }
}
