// Heartbeats and silent nodes without sockets, on a hand-moved clock.
#include <doctest/doctest.h>

#include "refusal.hpp"
#include "liveness.hpp"

using namespace dtrain::rdzv;
using namespace std::chrono_literals;
using rt::refusal_of;
using wire::ErrorCode;

namespace {

JoinRequest req(std::string host, std::int64_t hb_ms) {
  JoinRequest r;
  r.host = std::move(host);
  r.slots = 1;
  r.instances = 2;
  r.heartbeat_timeout_ms = hb_ms;
  return r;
}

wire::Frame heartbeat(std::string state) { return wire::Frame(wire::Op::heartbeat).str(state).i64(4).i64(1).i64(2); }

}  // namespace

TEST_SUITE("rendezvous::server::liveness") {
  TEST_CASE("a heartbeat refreshes a joined node and carries its state") {
    JoinBarrier j;
    Node& a = j.add(req("a", 15000), "x");
    auto t0 = Clock::now();
    auto early = refusal_of([&] { record_heartbeat(&a, j, heartbeat("running"), t0); });
    REQUIRE(early);
    CHECK(early->code == ErrorCode::not_joined);
    CHECK(refusal_of([&] { record_heartbeat(nullptr, j, heartbeat("running"), t0); })->code == ErrorCode::not_joined);
    j.add(req("b", 15000), "y");
    j.close(t0);
    record_heartbeat(&a, j, heartbeat(std::string(40, 's')), t0 + 5s);
    CHECK(a.last_seen == t0 + 5s);
    CHECK(a.state == std::string(32, 's'));  // capped
    CHECK(a.running == 4);
    CHECK(a.exited == 1);
    CHECK(a.restarts == 2);
    CHECK_THROWS_AS(record_heartbeat(&a, j, wire::Frame(wire::Op::heartbeat).str("x"), t0), wire::ProtocolError);
    a.lost = true;
    auto lost = refusal_of([&] { record_heartbeat(&a, j, heartbeat("running"), t0); });
    REQUIRE(lost);
    CHECK(lost->code == ErrorCode::lost);
  }

  TEST_CASE("the first node silent past the timeout, in join order") {
    JoinBarrier j;
    Node& a = j.add(req("a", 1000), "x");
    Node& b = j.add(req("b", 1000), "y");
    auto t0 = Clock::now();
    CHECK_FALSE(first_silent(j, t0 + 1h));  // not before the barrier closed
    j.close(t0);
    CHECK_FALSE(first_silent(j, t0 + 1000ms));  // exactly the timeout is not yet silent
    a.last_seen = t0 + 1s;
    auto s = first_silent(j, t0 + 1500ms);
    REQUIRE(s);
    CHECK(s->node == &b);
    CHECK(s->why == "no heartbeat for 1.5 s (timeout 1.0 s)");
    b.left = true;
    CHECK_FALSE(first_silent(j, t0 + 1500ms));
    a.lost = true;
    CHECK_FALSE(first_silent(j, t0 + 1h));
  }

  TEST_CASE("no timeout, no losses by silence") {
    JoinBarrier j;
    j.add(req("a", 0), "x");
    j.add(req("b", 0), "y");
    auto t0 = Clock::now();
    j.close(t0);
    CHECK_FALSE(first_silent(j, t0 + 24h));
  }
}
