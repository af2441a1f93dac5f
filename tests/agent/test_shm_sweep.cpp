// The agent's sweep of its workers' shared-memory segments (agent.cpp, the guardian in shim.c):
// every worker gets DTRAIN_SHM_PREFIX, the agent's own stem; what a worker SIGKILLed in generation 0
// left under it is gone before generation 1 starts, what the last generation left is gone when the
// agent returns, and when the agent itself is SIGKILLed its guardian removes it.
#include <doctest/doctest.h>

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "agent_test_util.hpp"

using namespace agent_test;

namespace {

// /dev/shm entries whose names start with `stem` ("" never matches).
std::size_t shm_count(const std::string& stem) {
  std::size_t n = 0;
  if (stem.empty()) return 0;
  if (DIR* d = ::opendir("/dev/shm")) {
    while (dirent* e = ::readdir(d)) n += std::strncmp(e->d_name, stem.c_str(), stem.size()) == 0;
    ::closedir(d);
  }
  return n;
}

std::string first_line(const fs::path& p) {
  auto lines = lines_of(slurp(p));
  return lines.empty() ? "" : lines[0];
}

}  // namespace

TEST_SUITE("agent::shm_sweep") {
  TEST_CASE("what a SIGKILLed worker left in /dev/shm is swept at the generation's end and at exit") {
    TempDir t;
    auto plan = sh_plan(2,
                        "echo \"$DTRAIN_SHM_PREFIX $DTRAIN_AGENT_ID\" > \"$T/prefix.$RANK\";"
                        " seg=/dev/shm/${DTRAIN_SHM_PREFIX}seg$RANK;"
                        " if [ \"$DTRAIN_GENERATION\" = 0 ]; then touch $seg; kill -9 $$; fi;"
                        " if [ -e $seg ]; then echo left > \"$T/gen1.$RANK\"; else echo gone > \"$T/gen1.$RANK\"; fi;"
                        " touch /dev/shm/${DTRAIN_SHM_PREFIX}last$RANK",
                        t);
    auto o = options(plan, t);
    o.plan.spec.restart.max_restarts = 1;
    o.plan.spec.restart.backoff_s = 0.05;
    auto r = run_agent(o, t);
    CHECK(r.rc == 0);
    const std::string line = first_line(t.path / "prefix.0");
    const std::string prefix = line.substr(0, line.find(' '));
    const std::string agent_id = line.substr(line.find(' ') + 1);
    CHECK(prefix == "dtrain-" + agent_id + "-");
    CHECK(first_line(t.path / "prefix.1") == line);
    CHECK(first_line(t.path / "gen1.0") == "gone");
    CHECK(first_line(t.path / "gen1.1") == "gone");
    CHECK(shm_count(prefix) == 0);
  }

  TEST_CASE("agent SIGKILLed: its guardian sweeps the workers' segments") {
    TempDir t;
    auto plan = sh_plan(2,
                        "echo \"$DTRAIN_SHM_PREFIX\" > \"$T/prefix.$RANK\";"
                        " touch /dev/shm/${DTRAIN_SHM_PREFIX}seg$RANK; touch \"$T/up.$RANK\"; exec sleep 300",
                        t);
    pid_t a = fork_agent(options(plan, t), t);
    REQUIRE(wait_until([&] { return all_files(t, "up.", 2); }, 30));
    const std::string prefix = first_line(t.path / "prefix.0");
    REQUIRE(prefix.rfind("dtrain-", 0) == 0);
    CHECK(shm_count(prefix) == 2);
    ::kill(a, SIGKILL);
    CHECK(wait_child(a, 30) == 128 + SIGKILL);
    CHECK(wait_until([&] { return shm_count(prefix) == 0; }, 10));
  }
}
