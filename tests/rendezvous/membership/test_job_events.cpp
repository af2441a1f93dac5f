// JobEvents, without sockets: one delivery per event, the first fatal event as the root cause, the
// one "lost the rendezvous" event, the exit barrier's expected loss and its hook.
#include <doctest/doctest.h>

#include <stdexcept>
#include <thread>
#include <vector>

#include "dtrain/rendezvous/membership/job_events.hpp"

using namespace dtrain::rdzv;
using namespace std::chrono_literals;

namespace {

Event numbered(std::int64_t seq, std::string kind, int node = 1) {
  Event e;
  e.seq = seq;
  e.kind = std::move(kind);
  e.node = node;
  return e;
}

}  // namespace

TEST_SUITE("rendezvous::job_events") {
  TEST_CASE("each numbered event once, in order; the first fatal one is the root cause") {
    JobEvents ev;
    std::vector<std::int64_t> got;
    ev.set_handler([&](const Event& e) { got.push_back(e.seq); });
    ev.deliver(numbered(1, "joined"));
    CHECK_FALSE(ev.root().has_value());  // "joined" ends no generation
    ev.deliver(numbered(2, "failure", 3));
    ev.deliver(numbered(2, "failure", 3));  // the watch asked again
    ev.deliver(numbered(1, "joined"));      // older
    ev.deliver(numbered(3, "lost", 4));
    CHECK(got == std::vector<std::int64_t>{1, 2, 3});
    CHECK(ev.last_seq() == 3);
    REQUIRE(ev.root().has_value());
    CHECK(ev.root()->node == 3);
    CHECK(ev.root()->kind == "failure");
  }

  TEST_CASE("the rendezvous lost: delivered once, and the root cause when first") {
    JobEvents ev;
    int delivered = 0;
    ev.set_handler([&](const Event&) { ++delivered; });
    ev.deliver(rendezvous_lost("127.0.0.1:1", "heartbeat failed"));
    ev.deliver(rendezvous_lost("127.0.0.1:1", "watch broke"));
    CHECK(delivered == 1);
    REQUIRE(ev.root().has_value());
    CHECK(ev.root()->node == -1);
    CHECK(ev.root()->message == "heartbeat failed");
  }

  TEST_CASE("a new generation forgets the events, the root cause and the exit barrier") {
    JobEvents ev;
    ev.deliver(numbered(5, "failure"));
    ev.deliver(rendezvous_lost("x", "gone"));
    ev.reset();
    CHECK_FALSE(ev.root().has_value());
    CHECK(ev.last_seq() == 0);
    int delivered = 0;
    ev.set_handler([&](const Event&) { ++delivered; });
    ev.deliver(numbered(1, "failure"));  // seq starts again at 1 in a new generation
    ev.deliver(rendezvous_lost("x", "gone again"));
    CHECK(delivered == 2);
  }

  TEST_CASE("exit barrier: the root cause so far comes back, and no hook is kept") {
    JobEvents ev;
    ev.deliver(numbered(1, "stopped"));
    int hooked = 0;
    auto cause = ev.enter_exit_barrier([&] { ++hooked; }, true);
    REQUIRE(cause.has_value());
    CHECK(cause->kind == "stopped");
    ev.deliver(numbered(2, "failure"));
    CHECK(hooked == 0);
  }

  TEST_CASE("exit barrier: a later root cause runs the hook once; an expected loss is noted, not delivered") {
    JobEvents ev;
    std::vector<std::string> got;
    ev.set_handler([&](const Event& e) { got.push_back(e.kind); });
    int hooked = 0;
    CHECK_FALSE(ev.enter_exit_barrier([&] { ++hooked; }, true).has_value());
    ev.deliver(rendezvous_lost("x", "node 0 stopped the server"));
    CHECK(got.empty());
    CHECK_FALSE(ev.root().has_value());
    CHECK_FALSE(ev.wait_root_or_loss(0ms).has_value());  // the loss ends the wait, with no root cause
    ev.deliver(numbered(1, "failure"));
    ev.deliver(numbered(2, "lost"));
    CHECK(hooked == 1);
    CHECK(got == std::vector<std::string>{"failure", "lost"});
  }

  TEST_CASE("wait_root_or_loss wakes when another thread delivers, and returns the root cause") {
    JobEvents ev;
    std::thread t([&] { ev.deliver(numbered(1, "failure", 2)); });
    auto root = ev.wait_root_or_loss(30s);
    t.join();
    REQUIRE(root.has_value());
    CHECK(root->node == 2);
  }

  TEST_CASE("a callback that throws is logged; later events still come") {
    JobEvents ev;
    int calls = 0;
    ev.set_handler([&](const Event&) {
      ++calls;
      throw std::runtime_error("callback broke");
    });
    ev.deliver(numbered(1, "joined"));
    ev.deliver(numbered(2, "failure"));
    CHECK(calls == 2);
    CHECK(ev.root()->seq == 2);
  }
}
