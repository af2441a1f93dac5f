// Every rank's Python stack, for any backend: dtrain's start-up hook (python/dtrain/_startup/
// sitecustomize.py) registers faulthandler in each Python worker; `dtrain status --stacks` and the
// hang rule signal the workers and read their dumps (agent/src/stacks.cpp). A native worker gets
// "no stack"; a sitecustomize the hook hides still runs. With torch: a gloo job with one rank asleep
// ends by the hang rule (the hook records torch.distributed's calls on the progress pages) with
// every rank's stack in the summary.
#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <string>

#include "../cli/run_binary.hpp"
#include "agent_test_util.hpp"
#include "test_needs.hpp"

namespace fs = std::filesystem;

namespace {

const dtrain::test::Need need_python("python", [] {
  std::string cmd = fmt::format("'{}' -c pass >/dev/null 2>&1", PYTHON_EXE);
  return std::system(cmd.c_str()) == 0 ? std::string() : fmt::format("no Python interpreter ('{}')", PYTHON_EXE);
});
const dtrain::test::Need need_torch("torch", [] {
  std::string cmd = fmt::format("'{}' -c 'import torch.distributed' >/dev/null 2>&1", PYTHON_EXE);
  return std::system(cmd.c_str()) == 0 ? std::string() : fmt::format("{} cannot import torch", PYTHON_EXE);
});

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// `dtrain launch JOB` in the background, with `env` (TMPDIR: the registry `dtrain status` reads).
pid_t launch(const std::string& job, const std::map<std::string, std::string>& env, const fs::path& err) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::clearenv();
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    FILE* e = std::freopen(err.c_str(), "w", stderr);
    (void)e;
    ::execl(DTRAIN_BIN, DTRAIN_BIN, "launch", "--no-progress", job.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

}  // namespace

TEST_SUITE("agent::stacks") {
  TEST_CASE("dtrain status --stacks: a Python rank's stack, a native rank's \"no stack\"; the hidden sitecustomize runs") {
    dtrain::test::TempDir t;
    auto env = dtrain::test::base_env();
    env["TMPDIR"] = t.path.string();
    // a sitecustomize of the user's own, which dtrain's hook hides and must run
    fs::create_directories(t.path / "site");
    agent_test::write_file(t.path / "site" / "sitecustomize.py",
                           "import os\nopen(os.path.join(os.environ['T'], 'chained-' + os.environ['RANK']), 'w').close()\n");
    env["PYTHONPATH"] = (t.path / "site").string();
    agent_test::write_file(t.path / "w.py", "import time\n\ndef wait_here():\n    time.sleep(120)\n\nwait_here()\n");
    std::string job = t.write("job.json", fmt::format(R"({{"command": ["sh", "-c",
        "if [ \"$RANK\" = 0 ]; then exec '{}' '{}'; else exec sleep 120; fi"],
        "cluster": {{"procs_per_instance": 2}}, "env": {{"T": "{}"}}, "grace_s": 1}})",
                                                      PYTHON_EXE, (t.path / "w.py").string(), t.path.string()));
    pid_t pid = launch(job, env, t.path / "err");
    REQUIRE(agent_test::wait_until([&] { return fs::exists(t.path / "chained-0"); }, 60));
    std::string out;
    bool seen = agent_test::wait_until([&] {
      out = dtrain::test::run({DTRAIN_BIN, "status", "--stacks"}, env).out;
      return has(out, "rank 0: time.sleep(120) at w.py:4 in wait_here");
    }, 60);
    CHECK_MESSAGE(seen, out);
    CHECK_MESSAGE(has(out, "rank 1: no stack: not a Python worker"), out);
    CHECK_MESSAGE(has(out, "File \"" + (t.path / "w.py").string() + "\", line 6 in <module>"), out);
    CHECK_MESSAGE(!has(out, "cannot see into"), out);
    ::kill(pid, SIGTERM);
    CHECK(agent_test::wait_child(pid, 30) == 143);
  }
}

TEST_SUITE("agent::stacks_gloo") {
  TEST_CASE("a gloo job with a rank asleep: the hang rule ends it, every rank's Python stack in the summary") {
    dtrain::test::TempDir t;
    auto env = dtrain::test::base_env();
    env["TMPDIR"] = t.path.string();
    // torch's own switch for env:// without libuv (Debian 13's torch 2.6 has none: tests/agent/CMakeLists.txt)
    if (const char* libuv = std::getenv("USE_LIBUV")) env["USE_LIBUV"] = libuv;
    agent_test::write_file(t.path / "hang_gloo.py", R"(import time
import torch
import torch.distributed as dist


def stall():
    time.sleep(120)


dist.init_process_group("gloo")
for _ in range(3):
    dist.all_reduce(torch.ones(10))
if dist.get_rank() == 1:
    stall()
dist.all_reduce(torch.ones(10))
)");
    std::string job = t.write("job.json", fmt::format(R"({{"command": ["{}", "{}"],
        "cluster": {{"procs_per_instance": 3}}, "output": {{"hang_timeout_s": 3}}, "grace_s": 1}})",
                                                      PYTHON_EXE, (t.path / "hang_gloo.py").string()));
    auto r = dtrain::test::run({DTRAIN_BIN, "launch", "--no-progress", job, "--summary-json", (t.path / "s.json").string()},
                               env, 120);
    INFO(r.err);
    CHECK(r.status == 70);
    // the hook put torch's calls on the pages: the rank that never reached the fourth is named
    CHECK(has(r.err, "root cause: rank 1 (local rank 1, node 0, pid "));
    CHECK(has(r.err, "never reached allreduce #4"));
    CHECK(has(r.err, "  Python stacks (each rank's main thread; all threads below):\n"));
    CHECK(has(r.err, "    rank 1: time.sleep(120) at hang_gloo.py:7 in stall\n"));
    CHECK(has(r.err, "    ranks 0, 2: "));
    CHECK(has(r.err, "distributed_c10d.py:"));
    CHECK(has(r.err, " in all_reduce\n"));
    auto s = nlohmann::json::parse(dtrain::test::read_file(t.path / "s.json"), nullptr, false);
    REQUIRE(s.is_object());
    std::string all = s["stacks"].dump();
    for (int rank = 0; rank < 3; ++rank) CHECK_MESSAGE(has(all, fmt::format("rank {} (pid ", rank)), all);
    CHECK(has(all, "hang_gloo.py\\\", line 7 in stall"));
    CHECK(has(all, "hang_gloo.py\\\", line 14 in <module>"));
  }
}
