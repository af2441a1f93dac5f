// The exit barrier without sockets.
#include <doctest/doctest.h>

#include "refusal.hpp"
#include "exit_barrier.hpp"

using namespace dtrain::rdzv;
using rt::refusal_of;

namespace {

JoinBarrier closed_job(int n) {
  JoinBarrier j;
  for (int i = 0; i < n; ++i) {
    JoinRequest r;
    r.host = "h" + std::to_string(i);
    r.requested = i;
    r.slots = 1;
    r.instances = n;
    j.add(r, "x");
  }
  j.close(Clock::now());
  return j;
}

}  // namespace

TEST_SUITE("rendezvous::server::exit_barrier") {
  TEST_CASE("finished once every node left; leaving twice counts once") {
    auto j = closed_job(3);
    ExitBarrier x;
    Node& n0 = *j.nodes()[0];
    CHECK_FALSE(x.leave(n0, j));
    CHECK_FALSE(x.leave(n0, j));
    CHECK(x.left() == 1);
    CHECK(n0.left);
    CHECK(n0.state == "done");
    CHECK(x.timeout_text(j, 2500) ==
          "exit barrier timed out after 2.5 s: 1 of 3 nodes finished; missing: node 1 (h1), node 2 (h2)");
    CHECK_FALSE(x.leave(*j.nodes()[1], j));
    CHECK_FALSE(x.finished());
    CHECK(x.leave(*j.nodes()[2], j));
    CHECK(x.finished());
  }

  TEST_CASE("a lost node fails the leaver, who still counts as done") {
    auto j = closed_job(2);
    ExitBarrier x;
    j.nodes()[1]->lost = true;
    auto r = refusal_of([&] { x.leave(*j.nodes()[0], j); });
    REQUIRE(r);
    CHECK(r->code == wire::ErrorCode::lost);
    CHECK(r->what == "node 1 (h1) was lost before the exit barrier");
    CHECK(j.nodes()[0]->left);
    CHECK(x.left() == 1);
  }
}
