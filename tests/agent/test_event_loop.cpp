// The agent's loop, timers and signal watchers (agent/src/event_loop.cpp): a timer fires when due,
// once or repeatedly, not after stop(); what a callback throws reaches the failure handler; a
// watched signal reaches its callback on the loop; every handle closed leaves the loop clean.
#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <string>

#include "event_loop.hpp"

using dtrain::agent::EventLoop;
using dtrain::agent::SignalWatch;
using dtrain::agent::Timer;
using Clock = std::chrono::steady_clock;

namespace {

// An open loop whose failures are collected.
struct Loop {
  EventLoop loop;
  std::vector<std::string> failures;
  Loop() {
    loop.open([this](const std::exception& e) { failures.emplace_back(e.what()); });
  }
};

}  // namespace

TEST_SUITE("agent::event_loop") {
  TEST_CASE("a timer fires once when due; run() returns when nothing is active") {
    Loop l;
    Timer t;
    int fired = 0;
    t.open(l.loop, [&] { ++fired; });
    auto t0 = Clock::now();
    t.start(0.05);
    CHECK(t.active());
    l.loop.run();
    CHECK(fired == 1);
    CHECK(Clock::now() - t0 >= std::chrono::milliseconds(50));  // not before it is due
    CHECK_FALSE(t.active());
    t.close();
    CHECK(l.loop.close());  // nothing left open
  }

  TEST_CASE("every() repeats until stopped; a stopped timer does not fire") {
    Loop l;
    Timer tick, never;
    int ticks = 0;
    tick.open(l.loop, [&] {
      if (++ticks == 3) tick.stop();
    });
    never.open(l.loop, [&] { FAIL("a stopped timer fired"); });
    tick.every(0.01);
    never.start(0.01);
    never.stop();
    l.loop.run();
    CHECK(ticks == 3);
    tick.close();
    never.close();
    CHECK(l.loop.close());
  }

  TEST_CASE("what a callback throws goes to the failure handler, and the loop goes on") {
    Loop l;
    Timer bad, good;
    bool good_fired = false;
    bad.open(l.loop, [] { throw std::runtime_error("broken callback"); });
    good.open(l.loop, [&] { good_fired = true; });
    bad.start(0);
    good.start(0.01);
    l.loop.run();
    CHECK(l.failures == std::vector<std::string>{"broken callback"});
    CHECK(good_fired);
    bad.close();
    good.close();
    CHECK(l.loop.close());
  }

  TEST_CASE("a watched signal reaches its callback on the loop") {
    Loop l;
    SignalWatch s;
    Timer send;
    std::vector<int> got;
    s.open(l.loop, {SIGUSR1, SIGUSR2}, [&](int sig) {
      got.push_back(sig);
      if (got.size() == 2) s.close();
    });
    send.open(l.loop, [] {
      ::kill(::getpid(), SIGUSR2);
      ::kill(::getpid(), SIGUSR1);
    });
    send.start(0);
    l.loop.run();  // returns once the watcher is closed
    REQUIRE(got.size() == 2);
    CHECK(((got[0] == SIGUSR1 && got[1] == SIGUSR2) || (got[0] == SIGUSR2 && got[1] == SIGUSR1)));
    send.close();
    CHECK(l.loop.close());
  }

  TEST_CASE("a handle left open: close() says so") {
    Loop l;
    Timer t;
    t.open(l.loop, [] {});
    CHECK_FALSE(l.loop.close());
    CHECK(l.loop.is_open());
    t.close();
    CHECK(l.loop.close());
  }

  TEST_CASE("to_ms: rounded, never negative") {
    CHECK(dtrain::agent::to_ms(0.0004) == 0);
    CHECK(dtrain::agent::to_ms(0.0005) == 1);
    CHECK(dtrain::agent::to_ms(2.5) == 2500);
    CHECK(dtrain::agent::to_ms(-1) == 0);
  }
}
