// DoneKeys, without etcd: which nodes finished, the wait for all of them, and wake().
#include <doctest/doctest.h>

#include <future>

#include "done_keys.hpp"

using dtrain::etcd::DoneKeys;
using namespace std::chrono_literals;

TEST_SUITE("etcd::done_keys") {
  TEST_CASE("the missing nodes by rank; marks from another thread end the wait") {
    DoneKeys d;
    d.reset({{0, "h0"}, {1, "h1"}, {2, "h2"}});
    d.mark(1);
    CHECK(d.done(1));
    CHECK_FALSE(d.done(0));
    CHECK(d.missing() == std::vector<std::string>{"node 0 (h0)", "node 2 (h2)"});
    auto waiting = std::async(std::launch::async, [&] { d.wait(60s); });
    d.mark(0);
    d.mark(2);
    waiting.get();
    CHECK(d.missing().empty());
  }

  TEST_CASE("wake() ends a wait with nodes still missing; reset() forgets it") {
    DoneKeys d;
    d.reset({{0, "h0"}, {1, "h1"}});
    auto waiting = std::async(std::launch::async, [&] { d.wait(60s); });
    d.wake();
    waiting.get();
    CHECK(d.missing().size() == 2);
    d.reset({{0, "h0"}});
    auto t0 = std::chrono::steady_clock::now();
    d.wait(50ms);  // not woken any more: the timeout ends it
    CHECK(std::chrono::steady_clock::now() - t0 >= 50ms);
    CHECK(d.missing() == std::vector<std::string>{"node 0 (h0)"});
  }
}
