// The /proc reading behind the escapee handling: stat lines, and descendants by parent links.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "escapees.hpp"

using namespace dtrain::agent;

TEST_SUITE("agent::escapees") {
  TEST_CASE("a stat line: the command name may hold spaces and parentheses") {
    proc::Entry e;
    REQUIRE(proc::parse_stat("4242 (my (odd) name) S 17 4242 4242 0 -1 4194560 ...", e));
    CHECK(e.pid == 4242);
    CHECK(e.state == 'S');
    CHECK(e.ppid == 17);
    CHECK(e.pgrp == 4242);
    REQUIRE(proc::parse_stat("7 (sh) Z 1 6 6", e));
    CHECK(e.state == 'Z');
    CHECK_FALSE(proc::parse_stat("", e));
    CHECK_FALSE(proc::parse_stat("12 no parens S 1 1", e));
    CHECK_FALSE(proc::parse_stat("x (a) S 1 1", e));
    CHECK_FALSE(proc::parse_stat("5 (a)", e));
  }

  TEST_CASE("descendants follow parent links, roots first") {
    std::vector<proc::Entry> all = {{10, 1, 10, 'S'}, {11, 10, 10, 'S'}, {12, 11, 12, 'S'}, {13, 12, 13, 'S'},
                                    {20, 1, 20, 'S'}, {21, 20, 20, 'S'}};
    auto d = proc::descendants(all, {10});
    CHECK(d.front() == 10);
    std::sort(d.begin(), d.end());
    CHECK(d == std::vector<pid_t>{10, 11, 12, 13});
    CHECK(proc::descendants(all, {99}) == std::vector<pid_t>{99});
  }

  TEST_CASE("the snapshot sees this process and a child with its parent link") {
    pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      ::pause();
      ::_exit(0);
    }
    auto all = proc::snapshot();
    auto self = std::find_if(all.begin(), all.end(), [](const proc::Entry& e) { return e.pid == ::getpid(); });
    auto kid = std::find_if(all.begin(), all.end(), [&](const proc::Entry& e) { return e.pid == child; });
    CHECK(self != all.end());
    REQUIRE(kid != all.end());
    CHECK(kid->ppid == ::getpid());
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
  }
}
