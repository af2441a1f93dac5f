// The store barrier without sockets: rounds, count checks, waiters that give up.
#include <doctest/doctest.h>

#include "refusal.hpp"
#include "dtrain/rendezvous/store/store_barrier.hpp"

using namespace dtrain::rdzv;
using rt::refusal_of;
using wire::ErrorCode;

TEST_SUITE("rendezvous::server::store_barrier") {
  TEST_CASE("the count-th arrival releases everyone, in arrival order, then the barrier resets") {
    StoreBarriers<int> b;
    CHECK_FALSE(b.arrive("x", 3, 1));
    CHECK_FALSE(b.arrive("x", 3, 2));
    CHECK(b.waiting("x") == 2);
    auto all = b.arrive("x", 3, 3);
    REQUIRE(all);
    CHECK(*all == std::vector<int>{1, 2, 3});
    CHECK(b.waiting("x") == 0);
    // a new round may name another count
    CHECK_FALSE(b.arrive("x", 2, 4));
    REQUIRE(b.arrive("x", 2, 5));
    // a barrier of one releases at once
    auto one = b.arrive("y", 1, 6);
    REQUIRE(one);
    CHECK(*one == std::vector<int>{6});
  }

  TEST_CASE("counts out of range or different from the waiting callers' are refused") {
    StoreBarriers<int> b;
    for (std::int64_t bad : {std::int64_t(0), std::int64_t(-1), kMaxBarrierCount + 1}) {
      CAPTURE(bad);
      auto r = refusal_of([&] { b.arrive("x", bad, 1); });
      REQUIRE(r);
      CHECK(r->code == ErrorCode::bad_request);
      CHECK(r->what == fmt::format("barrier 'x': count {} out of range", bad));
    }
    CHECK(b.waiting("x") == 0);
    CHECK_FALSE(b.arrive("x", 3, 1));
    auto r = refusal_of([&] { b.arrive("x", 2, 2); });
    REQUIRE(r);
    CHECK(r->what == "barrier 'x': this caller expects 2 but others expect 3");
    CHECK(b.waiting("x") == 1);  // the refused caller is not in
  }

  TEST_CASE("a waiter that gives up leaves; the timeout text counts it") {
    StoreBarriers<int> b;
    b.arrive("x", 3, 1);
    b.arrive("x", 3, 2);
    CHECK(b.timeout_text("x", 500) == "barrier 'x': 2 of 3 arrived after 500 ms");
    b.leave("x", 1);
    CHECK(b.waiting("x") == 1);
    b.leave("x", 7);  // not waiting: nothing happens
    b.leave("nope", 1);
    CHECK(b.waiting("x") == 1);
    b.leave("x", 2);
    CHECK(b.waiting("x") == 0);
    CHECK_FALSE(b.arrive("x", 2, 3));  // emptied: the count is free again
  }
}
