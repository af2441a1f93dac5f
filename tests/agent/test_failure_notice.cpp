// The first local failure on its way to the other nodes (agent/src/failure_notice.cpp): sent at once
// when its worker's output is read, else when it is, or after kTailWaitS at the latest; never twice.
#include <doctest/doctest.h>

#include <chrono>
#include <set>
#include <vector>

#include "failure_notice.hpp"

using dtrain::agent::EventLoop;
using dtrain::agent::FailureNotice;
using dtrain::agent::WorkerExit;

namespace {

struct Sent {
  std::vector<std::pair<WorkerExit, int>> sent;
  std::set<long> output_done;
  FailureNotice notice{{[this](long pid) { return output_done.count(pid) > 0; },
                        [](WorkerExit& w) { w.last_stderr = {"its last line"}; }},
                       [this](WorkerExit& w, int g) { sent.emplace_back(w, g); }};
};

WorkerExit failed(long pid) {
  WorkerExit w;
  w.rank = 1;
  w.pid = pid;
  w.exit_code = 3;
  return w;
}

}  // namespace

TEST_SUITE("agent::failure_notice") {
  TEST_CASE("output read: sent at once with its stderr; not read: sent when it is, once") {
    EventLoop loop;
    loop.open({});
    Sent s;
    s.notice.open(loop);
    s.output_done.insert(10);
    s.notice.hold(failed(10), 0);
    REQUIRE(s.sent.size() == 1);
    CHECK(s.sent[0].first.last_stderr == std::vector<std::string>{"its last line"});
    s.notice.hold(failed(11), 1);
    s.notice.flush(false);
    CHECK(s.sent.size() == 1);  // its output is not read yet
    s.output_done.insert(11);
    s.notice.flush(false);
    REQUIRE(s.sent.size() == 2);
    CHECK(s.sent[1].second == 1);
    s.notice.flush(true);
    CHECK(s.sent.size() == 2);  // nothing held
    loop.run();                 // no timer left armed
    s.notice.close();
    CHECK(loop.close());
  }

  TEST_CASE("output never read: sent after kTailWaitS") {
    EventLoop loop;
    loop.open({});
    Sent s;
    s.notice.open(loop);
    auto t0 = std::chrono::steady_clock::now();
    s.notice.hold(failed(12), 0);
    CHECK(s.sent.empty());
    loop.run();
    REQUIRE(s.sent.size() == 1);
    CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(500));
    s.notice.close();
    CHECK(loop.close());
  }

  TEST_CASE("no one to send to: nothing is held") {
    EventLoop loop;
    loop.open({});
    FailureNotice n({[](long) { return false; }, [](WorkerExit&) {}}, {});
    n.open(loop);
    n.hold(failed(13), 0);
    CHECK_FALSE(uv_loop_alive(loop.get()));
    n.close();
    CHECK(loop.close());
  }
}
