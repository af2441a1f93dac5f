// The event log without sockets: order, generation, root cause, lookups by seq.
#include <doctest/doctest.h>

#include "event_log.hpp"

using namespace dtrain::rdzv;

TEST_SUITE("rendezvous::server::event_log") {
  TEST_CASE("events get seq 1, 2, ... and the generation; the first is the root cause") {
    EventLog log(3);
    CHECK_FALSE(log.fatal());
    CHECK(log.root_cause() == nullptr);
    CHECK(log.first_after(0) == nullptr);
    Event f;
    f.node = 1;
    f.rank = 5;
    f.exit_code = 3;
    f.root_cause = true;  // ignored: the log decides
    const Event& e1 = log.append(EventKind::failure, f);
    CHECK(e1.seq == 1);
    CHECK(e1.generation == 3);
    CHECK(e1.kind == "failure");
    CHECK(e1.root_cause);
    CHECK(log.fatal());
    Event l;
    l.node = 2;
    l.host = "h2";
    const Event& e2 = log.append(EventKind::lost, l);
    CHECK(e2.seq == 2);
    CHECK(e2.kind == "lost");
    CHECK_FALSE(e2.root_cause);
    REQUIRE(log.root_cause() != nullptr);
    CHECK(log.root_cause()->seq == 1);
    CHECK(log.events().size() == 2);
  }

  TEST_CASE("first_after finds the next event a watcher has not seen") {
    EventLog log(0);
    log.append(EventKind::lost, Event{});
    log.append(EventKind::failure, Event{});
    REQUIRE(log.first_after(-5) != nullptr);
    CHECK(log.first_after(-5)->seq == 1);
    CHECK(log.first_after(0)->seq == 1);
    CHECK(log.first_after(1)->seq == 2);
    CHECK(log.first_after(2) == nullptr);
    CHECK(log.first_after(100) == nullptr);
  }

  TEST_CASE("kind names are the wire's") {
    CHECK(kind_name(EventKind::failure) == "failure");
    CHECK(kind_name(EventKind::lost) == "lost");
  }
}
