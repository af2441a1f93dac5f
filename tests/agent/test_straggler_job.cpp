// The straggler report through the real binary (agent/src/progress_watch.cpp, straggler.cpp): a job
// of examples/c_allreduce where rank 1 sleeps 50 ms before each iteration; `dtrain status` names it
// live, the launch warns, and the run's end names it (stderr and --summary-json). Then the same
// through the Python start-up hook's page writer (python/dtrain/_startup/sitecustomize.py), with a
// torch.distributed_c10d of the test's own whose all_reduce is a real barrier between the ranks'
// processes (through files): no torch needed.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
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

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

}  // namespace

TEST_SUITE("agent::straggler_job") {
  TEST_CASE("a rank 50 ms slow per step: dtrain status names it live, the launch warns, the summary names it") {
    dtrain::test::TempDir t;
    auto env = dtrain::test::base_env();
    env["TMPDIR"] = t.path.string();  // this test's registry of runs
    // 160 iterations of 6 calls: rank 1 makes the others wait about 8 s in all (at least 50 ms per
    // iteration, whatever the machine's load), its share near 1
    std::string job = t.write("job.json", fmt::format(R"({{"command": ["{}", "--count", "1000", "--iters", "160",
        "--slow-rank", "1", "--slow-us", "50000"], "cluster": {{"procs_per_instance": 3}}, "grace_s": 1}})",
                                                      C_ALLREDUCE));
    fs::path err = t.path / "launch.err", summary = t.path / "s.json";
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("TMPDIR", t.path.c_str(), 1);
      ::setenv("DTRAIN_TEST_GPUS", "0", 1);
      int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, STDERR_FILENO);
      ::execl(DTRAIN_BIN, DTRAIN_BIN, "launch", "--no-progress", "--straggler-share", "0.5", "--summary-json",
              summary.c_str(), job.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    std::string out, js;
    bool seen = agent_test::wait_until([&] {
      out = dtrain::test::run({DTRAIN_BIN, "status"}, env).out;
      js = dtrain::test::run({DTRAIN_BIN, "status", "--json"}, env).out;
      return has(out, "stragglers (the last ") && has(out, "slowest rank 1 kept the others waiting ") &&
             has(js, "\"stragglers\":[\"stragglers (the last ");
    }, 60);
    CHECK_MESSAGE(seen, out << js);
    CHECK(has(out, "  rank 1: the others waited "));
    CHECK(agent_test::wait_child(pid, 120) == 0);
    std::string e = dtrain::test::read_file(err);
    INFO(e);
    CHECK(has(e, "dtrain: warning: straggler: rank 1 kept the others waiting "));
    CHECK(has(e, "(output.straggler_share 0.5)"));
    // the run's end: the success line, then the report over the whole run
    auto end = e.find("dtrain: job finished: 3 ranks exited 0");
    REQUIRE(end != std::string::npos);
    CHECK(has(e.substr(end), "dtrain: stragglers (the whole run, "));
    CHECK(has(e.substr(end), "3 ranks): slowest rank 1 kept the others waiting "));
    CHECK(has(e.substr(end), "% of the time (allreduce "));
    CHECK(has(dtrain::test::read_file(summary), "slowest rank 1 kept the others waiting"));
  }
}

TEST_SUITE("agent::straggler_python") {
  TEST_CASE("the Python start-up hook's page writer: a rank 50 ms slow per step is named at the run's end") {
    dtrain::test::TempDir t;
    // a torch.distributed.distributed_c10d that the hook wraps as it wraps torch's; its all_reduce
    // waits until every rank has reached the same step (a rank's step file, replaced whole)
    std::filesystem::create_directories(t.path / "py" / "torch" / "distributed");
    agent_test::write_file(t.path / "py" / "torch" / "__init__.py", "");
    agent_test::write_file(t.path / "py" / "torch" / "distributed" / "__init__.py", "");
    agent_test::write_file(t.path / "py" / "torch" / "distributed" / "distributed_c10d.py", R"(import os
import time

_dir = os.environ["STEP_DIR"]
_rank, _size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])


def get_backend(group=None):
    return "gloo"


def _step(r):
    try:
        with open(os.path.join(_dir, str(r))) as f:
            return int(f.read() or -1)
    except FileNotFoundError:
        return -1


def all_reduce(step, group=None):
    tmp = os.path.join(_dir, "%d.new" % _rank)
    with open(tmp, "w") as f:
        f.write(str(step))
    os.replace(tmp, os.path.join(_dir, str(_rank)))
    while min(_step(r) for r in range(_size)) < step:
        time.sleep(0.001)
)");
    agent_test::write_file(t.path / "train.py", R"(import os
import time

import torch.distributed.distributed_c10d as c10d

for step in range(60):
    if os.environ["RANK"] == "1":
        time.sleep(0.05)
    c10d.all_reduce(step)
)");
    std::filesystem::create_directories(t.path / "steps");
    std::string job = t.write("job.json", fmt::format(R"({{"command": ["{}", "{}"], "cluster": {{"procs_per_instance": 3}},
        "env": {{"PYTHONPATH": "{}", "STEP_DIR": "{}"}}, "grace_s": 1}})", PYTHON_EXE, (t.path / "train.py").string(),
                                                      (t.path / "py").string(), (t.path / "steps").string()));
    auto env = dtrain::test::base_env();
    env["TMPDIR"] = t.path.string();
    auto r = dtrain::test::run({DTRAIN_BIN, "launch", "--no-progress", job}, env, 120);
    INFO(r.err);
    CHECK(r.status == 0);
    CHECK(has(r.err, "dtrain: stragglers (the whole run, "));
    CHECK(has(r.err, "3 ranks): slowest rank 1 kept the others waiting "));
    CHECK(has(r.err, "% of the time (allreduce "));
  }
}
