// The worker group (agent/src/worker_group.cpp) with real processes: reaping and draining output.
#include <doctest/doctest.h>

#include <signal.h>

#include <chrono>
#include <fstream>
#include <string>

#include "agent_test_util.hpp"

using namespace agent_test;

namespace {

// The state letter of /proc/PID/stat ('Z' a zombie, 'T' stopped); '?' when it cannot be read.
char proc_state(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(in, line);
  auto close = line.rfind(')');
  return close == std::string::npos || close + 2 >= line.size() ? '?' : line[close + 2];
}

pid_t pid_in(const fs::path& file) {
  std::string text = slurp(file);
  return text.empty() || text.back() != '\n' ? 0 : static_cast<pid_t>(std::stol(text));
}

}  // namespace

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

  TEST_CASE("a worker that exited by itself before the stop is not 'stopped by dtrain': it stays the root cause") {
    // Rank 1 fails (7), then rank 0 reports it dead (14), both before the agent reaps either: the
    // agent, stopped meanwhile, reaps rank 0 first (the lower pid), stops the group, then reaps
    // rank 1, whose own failure must still take the root cause from the rank that only saw it.
    TempDir t;
    auto plan = sh_plan(2,
                        "echo $$ > \"$T/pid$RANK\"; while [ ! -e \"$T/go$RANK\" ]; do sleep 0.01; done;"
                        " if [ $RANK = 1 ]; then echo 'rank 1 fails on its own' >&2; exit 7; fi;"
                        " echo \"rank 1 ($(cat \"$T/pid1\")) died\" >&2; exit 14",
                        t);
    pid_t agent = fork_agent(options(plan, t), t);
    REQUIRE(wait_until([&] { return pid_in(t.path / "pid0") > 0 && pid_in(t.path / "pid1") > 0; }, 30));
    pid_t rank0 = pid_in(t.path / "pid0"), rank1 = pid_in(t.path / "pid1");
    ::kill(agent, SIGSTOP);
    bool held = wait_until([&] { return proc_state(agent) == 'T'; }, 10);
    write_file(t.path / "go1", "");
    held = held && wait_until([&] { return proc_state(rank1) == 'Z'; }, 10);
    write_file(t.path / "go0", "");
    held = held && wait_until([&] { return proc_state(rank0) == 'Z'; }, 10);
    ::kill(agent, SIGCONT);
    REQUIRE(held);
    int rc = wait_child(agent, 60);
    std::string err = slurp(t.path / "agent.err");
    INFO(err);
    CHECK(rc == 7);
    CHECK(err.find("root cause: rank 1 ") != std::string::npos);
    CHECK(err.find("(stopped by dtrain)") == std::string::npos);
  }
}
