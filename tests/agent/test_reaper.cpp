// Reaping the agent's children on SIGCHLD (agent/src/reaper.cpp): each watched child's wait status
// reaches its callback, the loop lives exactly as long as a watched child is left, and with
// reap_all a child nobody watches is reaped too.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include <cerrno>
#include <map>

#include "reaper.hpp"

using dtrain::agent::Reaper;

namespace {

// A child that exits with `code` after `ms` (a lifetime, not a wait for anything), or kills itself
// with `sig`.
pid_t child(int code, int ms, int sig = 0) {
  pid_t p = ::fork();
  REQUIRE(p >= 0);
  if (p == 0) {
    ::usleep(static_cast<useconds_t>(ms) * 1000);
    if (sig != 0) {
      ::signal(sig, SIG_DFL);  // not the test framework's crash handler, inherited
      ::raise(sig);
    }
    ::_exit(code);
  }
  return p;
}

// A loop with a started Reaper; closes both, checking the loop is left clean.
struct ReaperLoop {
  uv_loop_t loop{};
  Reaper r;
  explicit ReaperLoop(bool reap_all) {
    REQUIRE(uv_loop_init(&loop) == 0);
    r.start(&loop, reap_all);
  }
  ~ReaperLoop() {
    r.close();
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK(uv_loop_close(&loop) == 0);
  }
};

}  // namespace

TEST_SUITE("agent::reaper") {
  TEST_CASE("watched children: exit codes and signals reach their callbacks; the loop ends with the last") {
    for (bool reap_all : {false, true}) {
      CAPTURE(reap_all);
      ReaperLoop l(reap_all);
      Reaper& r = l.r;
      std::map<pid_t, int> got;
      // lifetimes one after the other: the loop must outlive the first exits
      pid_t a = child(0, 10), b = child(3, 50), c = child(0, 100, SIGTERM);
      for (pid_t p : {a, b, c}) r.watch(p, [&got, p](int status) { got[p] = status; });
      CHECK(r.watched() == 3);
      uv_run(&l.loop, UV_RUN_DEFAULT);  // returns once all three are reaped
      CHECK(r.watched() == 0);
      REQUIRE(got.size() == 3);
      CHECK((WIFEXITED(got[a]) && WEXITSTATUS(got[a]) == 0));
      CHECK((WIFEXITED(got[b]) && WEXITSTATUS(got[b]) == 3));
      CHECK((WIFSIGNALED(got[c]) && WTERMSIG(got[c]) == SIGTERM));
    }
  }

  TEST_CASE("reap_all also reaps a child nobody watches; without it, such a child is left alone") {
    for (bool reap_all : {false, true}) {
      CAPTURE(reap_all);
      ReaperLoop l(reap_all);
      Reaper& r = l.r;
      pid_t stranger = child(0, 0);
      siginfo_t info{};
      REQUIRE(::waitid(P_PID, static_cast<id_t>(stranger), &info, WEXITED | WNOWAIT) == 0);  // it exited, unreaped
      pid_t watched = child(0, 0);  // exits after the stranger
      bool seen = false;
      r.watch(watched, [&](int) { seen = true; });
      uv_run(&l.loop, UV_RUN_DEFAULT);
      CHECK(seen);
      errno = 0;
      int status = 0;
      pid_t w = ::waitpid(stranger, &status, WNOHANG);
      if (reap_all) {
        CHECK(w == -1);
        CHECK(errno == ECHILD);  // already reaped
      } else {
        CHECK(w == stranger);  // still ours to reap
      }
    }
  }
}
