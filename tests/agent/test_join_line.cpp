// The join barrier's waiting line (agent/src/join_line.cpp) where stderr is no terminal: a line at
// once, on each change, and again every JoinLine::kRepeat of waiting; none with --no-progress.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include "agent_test_util.hpp"
#include "join_line.hpp"

using dtrain::agent::JoinLine;
using std::chrono::milliseconds;

namespace {

dtrain::rdzv::JoinProgress unreachable(milliseconds elapsed) {
  dtrain::rdzv::JoinProgress p;
  p.reachable = false;
  p.endpoint = "10.0.0.1:29400";
  p.elapsed = elapsed;
  p.timeout = milliseconds(600000);
  return p;
}

dtrain::rdzv::JoinProgress waiting(int joined, milliseconds elapsed) {
  dtrain::rdzv::JoinProgress p;
  p.endpoint = "10.0.0.1:29400";
  p.joined = joined;
  p.instances = 3;
  p.missing = "node 2";
  p.elapsed = elapsed;
  p.timeout = milliseconds(600000);
  return p;
}

}  // namespace

TEST_SUITE("agent::join_line") {
  TEST_CASE("a line at once, on each change, and every kRepeat while nothing changes") {
    agent_test::TempDir t;
    int fd = ::open((t.path / "err").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    REQUIRE(fd >= 0);
    JoinLine line(-1, fd);  // shown (the default), as lines: a file is no terminal
    const milliseconds repeat = JoinLine::kRepeat;
    line.show(unreachable(milliseconds(0)));
    line.show(unreachable(milliseconds(1000)));   // unchanged, too soon
    line.show(unreachable(repeat));               // unchanged, due again
    line.show(waiting(2, repeat + milliseconds(100)));  // changed: at once
    line.show(waiting(2, repeat + milliseconds(200)));
    line.clear();  // nothing to erase: no live line
    ::close(fd);
    auto lines = agent_test::lines_of(agent_test::slurp(t.path / "err"));
    REQUIRE(lines.size() == 3);
    CHECK(lines[0] == "dtrain: " + unreachable(milliseconds(0)).line());
    CHECK(lines[1] == "dtrain: " + unreachable(repeat).line());
    CHECK(lines[2] == "dtrain: " + waiting(2, repeat + milliseconds(100)).line());
    CHECK(lines[2].find("2/3 (missing: node 2)") != std::string::npos);
  }

  TEST_CASE("--no-progress: no line at all") {
    agent_test::TempDir t;
    int fd = ::open((t.path / "err").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    JoinLine line(0, fd);
    line.show(unreachable(milliseconds(0)));
    ::close(fd);
    CHECK(agent_test::slurp(t.path / "err").empty());
  }
}
