// The worker group (agent/src/worker_group.cpp) with real processes: reaping and draining output.
#include <doctest/doctest.h>

#include <signal.h>

#include <chrono>

#include "agent_test_util.hpp"

using namespace agent_test;

TEST_SUITE("agent::worker_group") {
  TEST_CASE("a failing worker whose output is held by an escaped process: the job still ends") {
    // the escapee leaves the worker's process group (setsid) and keeps its stdout open
    TempDir t;
    auto plan = sh_plan(1,
                        "setsid sh -c 'touch \"$T/esc.up\"; exec sleep 20' & echo $! > \"$T/escapee\";"
                        " while [ ! -e \"$T/esc.up\" ]; do sleep 0.02; done; echo bye; exit 3",
                        t);
    auto start = std::chrono::steady_clock::now();
    auto r = run_agent(options(plan, t), t);
    double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    pid_t escapee = static_cast<pid_t>(std::stol(slurp(t.path / "escapee")));
    ::kill(escapee, SIGKILL);
    CHECK(r.rc == 3);
    CHECK(took < 10);  // the drain period after the last exit, not the escapee's 20 s
    CHECK(r.out.find("[0/0] bye") != std::string::npos);
  }
}
