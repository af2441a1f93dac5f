#pragma once
// Helpers of the agent integration tests: hand-built plans, temp folders, runs in-process or in a
// forked agent process, and /proc scans for processes left behind.
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "dtrain/agent/agent.hpp"

namespace agent_test {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir();
  ~TempDir();  // removed unless DTRAIN_TEST_KEEP is set
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

std::string slurp(const fs::path& p);
std::vector<std::string> lines_of(const std::string& text);
void write_file(const fs::path& p, const std::string& text, bool executable = false);
// t/<prefix>0 .. t/<prefix>(n-1) all exist (the workers' "I am up" files)
bool all_files(const TempDir& t, const std::string& prefix, int n);

// One node, n local workers running `sh -c script`; the script sees T (the temp dir) in its env.
dtrain::config::Plan sh_plan(int n, const std::string& script, const TempDir& t);
dtrain::agent::AgentOptions options(dtrain::config::Plan plan, const TempDir& t);

struct Run {
  int rc = -1;
  std::string out, err;
  dtrain::agent::AgentResult result;
};
// Runs the agent on this thread; stdout/stderr of the job go to files in t.
Run run_agent(dtrain::agent::AgentOptions opt, const TempDir& t);

// Runs the agent in a forked child (signals can be sent to it); returns its pid.
pid_t fork_agent(dtrain::agent::AgentOptions opt, const TempDir& t);
// Waits for the child; returns its exit status (128+N when killed by N), -1 on timeout.
int wait_child(pid_t pid, double timeout_s);

bool wait_until(const std::function<bool()>& cond, double timeout_s);
// For worker scripts (sh): `await FILE` waits until FILE exists, polling, for 60 s at most (then the
// worker exits 98). A worker waits for what it can see, never for a time.
inline constexpr const char* kAwait =
    "await() { i=0; while [ ! -e \"$1\" ]; do i=$((i+1)); [ $i -lt 3000 ] || exit 98; sleep 0.02; done; }; ";
// Processes whose environment contains `needle` (e.g. a marker variable), other than us.
std::vector<pid_t> procs_with_env(const std::string& needle);
bool pid_alive(pid_t pid);  // exists and is not a zombie
std::string unique_marker();

}  // namespace agent_test
