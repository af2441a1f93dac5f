// JoinCancel, without sockets: a cancel reaches the join's checks, its registered close, its waits
// and the connect canceller, from another thread; a join that ended leaves nothing registered.
#include <doctest/doctest.h>

#include <future>

#include "dtrain/rendezvous/membership/join_cancel.hpp"

using namespace dtrain::rdzv;
using namespace std::chrono_literals;

TEST_SUITE("rendezvous::join_cancel") {
  TEST_CASE("before cancel() nothing throws; after it every check names where, and the canceller is raised") {
    JoinCancel c;
    CHECK_NOTHROW(c.check("127.0.0.1:29400"));
    CHECK_FALSE(c.canceller()->raised());
    c.cancel();
    c.cancel();  // idempotent
    CHECK_THROWS_WITH_AS(c.check("127.0.0.1:29400"), "joining the rendezvous at 127.0.0.1:29400: cancelled", Cancelled);
    CHECK(c.canceller()->raised());
    CHECK(c.wait_for(0ms));
  }

  TEST_CASE("cancel() closes what the join registered, once; not after the registration ended") {
    JoinCancel c;
    int closed = 0;
    {
      auto closing = c.closing([&] { ++closed; });
    }
    c.cancel();
    CHECK(closed == 0);  // the join was over

    JoinCancel d;
    {
      auto closing = d.closing([&] { ++closed; });
      d.cancel();
      d.cancel();
    }
    CHECK(closed == 1);
  }

  TEST_CASE("registered after cancel(): not called, and check() tells") {
    JoinCancel c;
    c.cancel();
    bool closed = false;
    auto closing = c.closing([&] { closed = true; });
    CHECK_FALSE(closed);
    CHECK_THROWS_AS(c.check("x"), Cancelled);
  }

  TEST_CASE("a wait ends when another thread cancels") {
    JoinCancel c;
    auto waiting = std::async(std::launch::async, [&] { return c.wait_for(60s); });
    c.cancel();
    CHECK(waiting.get());
    JoinCancel idle;
    CHECK_FALSE(idle.wait_for(1ms));
  }
}
