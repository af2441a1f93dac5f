// The agent's inbox (agent/src/inbox.cpp): events posted from other threads reach the loop thread
// in the order they were posted, those posted before the loop opened included; once closed, posts
// are dropped.
#include <doctest/doctest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "inbox.hpp"

using dtrain::agent::Event;
using dtrain::agent::EventLoop;
using dtrain::agent::Inbox;

namespace {

Event numbered(int n) {
  Event e;
  e.kind = Event::Kind::abort;
  e.exit_code = n;
  return e;
}

}  // namespace

TEST_SUITE("agent::inbox") {
  TEST_CASE("posts from another thread arrive on the loop thread in order, early ones included") {
    EventLoop loop;
    std::vector<std::string> failures;
    loop.open([&](const std::exception& e) { failures.emplace_back(e.what()); });
    Inbox inbox;
    inbox.post(numbered(0));  // before the loop opens: it waits
    std::vector<int> got;
    const auto loop_thread = std::this_thread::get_id();
    bool on_loop_thread = true;
    inbox.open(loop, [&](const Event& e) {
      on_loop_thread &= std::this_thread::get_id() == loop_thread;
      got.push_back(e.exit_code);
      if (e.exit_code == 3) throw std::runtime_error("event 3 broke");  // the next ones still come
      if (got.size() == 1001) inbox.close();
    });
    std::thread poster([&] {
      for (int i = 1; i <= 1000; ++i) inbox.post(numbered(i));
    });
    loop.run();  // until the inbox closes
    poster.join();
    inbox.post(numbered(5000));  // dropped: closed
    loop.run();
    REQUIRE(got.size() == 1001);
    for (int i = 0; i <= 1000; ++i) CHECK(got[static_cast<std::size_t>(i)] == i);
    CHECK(on_loop_thread);
    CHECK(failures == std::vector<std::string>{"event 3 broke"});
    CHECK(loop.close());
  }

  TEST_CASE("an inbox closed before anything was delivered drops what waits") {
    EventLoop loop;
    loop.open({});
    Inbox inbox;
    int delivered = 0;
    inbox.open(loop, [&](const Event&) { ++delivered; });
    inbox.post(numbered(1));
    inbox.close();
    loop.run();
    CHECK(delivered == 0);
    CHECK(loop.close());
  }
}
