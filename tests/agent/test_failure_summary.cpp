// The failure summary of `dtrain launch` with real Python workers: TORCHELASTIC_ERROR_FILE and torch's
// @record, the first exception on stderr (not the 15 lines an atexit hook prints after it), the
// interpreter hint of a ModuleNotFoundError, dtrain's lines never joined to a worker's, a worker's
// escapes shown and never acted on, and the real exception behind 10^5 repeated headers.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "agent_test_util.hpp"
#include "test_needs.hpp"

using namespace agent_test;

namespace {

const dtrain::test::Need need_python("python", [] {
  std::string cmd = fmt::format("'{}' -c pass >/dev/null 2>&1", PYTHON_EXE);
  return std::system(cmd.c_str()) == 0 ? std::string() : fmt::format("no Python interpreter ('{}')", PYTHON_EXE);
});
const dtrain::test::Need need_torch("torch", [] {
  std::string cmd = fmt::format("{} -c 'import torch.distributed.elastic.multiprocessing.errors' >/dev/null 2>&1", PYTHON_EXE);
  return std::system(cmd.c_str()) == 0 ? std::string() : fmt::format("{} cannot import torch", PYTHON_EXE);
});

struct Run {
  int rc = -1;
  std::string err;
  nlohmann::json summary;
};

// `dtrain launch ARGS...` in t (cwd), stderr in a file, the JSON summary read back.
Run launch(const TempDir& t, std::vector<std::string> args, const std::map<std::string, std::string>& env = {}) {
  args.insert(args.begin(), {DTRAIN_BIN, "launch", "--no-progress", "--summary-json", t / "summary.json"});
  std::map<std::string, std::string> all = {
      {"PATH", "/usr/local/bin:/usr/bin:/bin"}, {"HOME", "/tmp"}, {"LC_ALL", "C"}, {"DTRAIN_TEST_GPUS", "0"}};
  for (const auto& [k, v] : env) all[k] = v;
  std::vector<std::string> env_s;
  for (const auto& [k, v] : all) env_s.push_back(k + "=" + v);
  pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> argv, envp;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env_s) envp.push_back(e.data());
    envp.push_back(nullptr);
    int e = ::open((t / "err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int n = ::open("/dev/null", O_RDWR);
    ::dup2(n, 0);
    ::dup2(n, 1);
    ::dup2(e, 2);
    if (::chdir(t.path.c_str()) != 0) _exit(126);
    ::execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  Run r;
  r.rc = wait_child(pid, 120);
  if (r.rc < 0) ::kill(pid, SIGKILL), wait_child(pid, 10);
  r.err = slurp(t.path / "err");
  r.summary = nlohmann::json::parse(slurp(t.path / "summary.json"), nullptr, false);
  return r;
}

// Rank `failing` raises ValueError (through torch's @record when `record`), then an atexit hook
// prints 15 lines.
void write_worker(const TempDir& t, bool record, int failing) {
  write_file(t.path / "worker.py", fmt::format(R"(import atexit, os, sys
with open("error-file-" + os.environ["RANK"], "w") as f:
    f.write(os.environ.get("TORCHELASTIC_ERROR_FILE", "unset"))
def noise():
    for i in range(15):
        print(f"atexit line {{i}}", file=sys.stderr)
atexit.register(noise)
def main():
    if os.environ["RANK"] == "{0}":
        raise ValueError("bad value on rank {0}")
if {1}:
    from torch.distributed.elastic.multiprocessing.errors import record
    main = record(main)
main()
)", failing, record ? "True" : "False"));
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_SUITE("agent::failure_summary") {
  TEST_CASE("no @record: the first exception block, not the atexit lines after it; every rank its own error file") {
    TempDir t;
    write_worker(t, false, 1);
    auto r = launch(t, {"--nproc-per-node", "2", "--", PYTHON_EXE, "worker.py"});
    CHECK(r.rc == 1);
    CHECK(r.err.find("  root cause: rank 1 (local rank 1, node 0") != std::string::npos);
    CHECK(r.err.find("  first exception on its stderr:\n    | Traceback (most recent call last):\n") != std::string::npos);
    CHECK(r.err.find("    | ValueError: bad value on rank 1\n") != std::string::npos);
    CHECK(r.err.find("    | atexit line") == std::string::npos);
    REQUIRE(r.summary.is_object());
    const auto& root = r.summary["root_cause"];
    CHECK(root["rank"] == 1);
    CHECK(root["error"]["source"] == "first_exception");
    CHECK(root["first_exception"].back() == "ValueError: bad value on rank 1");
    CHECK(root["first_exception"].front() == "Traceback (most recent call last):");
    CHECK(root["last_stderr"].back() == "atexit line 14");  // the tail is still there, as it was
    // torchrun's contract: a path per rank in the run's attempt folder
    std::string f0 = slurp(t.path / "error-file-0"), f1 = slurp(t.path / "error-file-1");
    CHECK(f0 != f1);
    CHECK(f1.find("/attempt-0/1/error.json") != std::string::npos);
    CHECK(root["error_file"] == f1);
  }

  TEST_CASE("a ModuleNotFoundError names the interpreter that ran the worker and how to pick another") {
    TempDir t;
    std::filesystem::create_directories(t.path / "bin");
    write_file(t.path / "bin" / "python3", fmt::format("#!/bin/sh\nexec {} \"$@\"\n", PYTHON_EXE), true);
    write_file(t.path / "train.py", "import dtrain_no_such_module_xyz\n");
    auto r = launch(t, {"--nproc-per-node", "1", "--", "python3", "train.py"},
                    {{"PATH", (t.path / "bin").string() + ":/usr/bin:/bin"}});
    CHECK(r.rc == 1);
    std::string hint = fmt::format("  hint: the worker ran the interpreter {}", (t.path / "bin" / "python3").string());
    CHECK(r.err.find(hint) != std::string::npos);
    CHECK(r.err.find("--python PATH (or PYTHON_EXEC=PATH)") != std::string::npos);
    REQUIRE(r.summary.is_object());
    CHECK(r.summary["root_cause"]["hint"].get<std::string>().find((t.path / "bin" / "python3").string()) != std::string::npos);
  }

  TEST_CASE("escapes and carriage returns from a worker's error file and stderr are shown, never acted on") {
    TempDir t;
    write_file(t.path / "w.py", R"(import json, os, sys
trap = "\x1b[2J\x1b]0;pwned\x07wiped\r"
sys.stderr.write("last words " + trap + "\n")
with open(os.environ["TORCHELASTIC_ERROR_FILE"], "w") as f:
    json.dump({"message": {"message": "ValueError: " + trap,
                           "extraInfo": {"py_callstack": "Traceback (most recent call last):\n  " + "x" * 5000 +
                                                         "\nValueError: " + trap, "timestamp": "1"}}}, f)
sys.exit(1)
)");
    auto r = launch(t, {"--nproc-per-node", "1", "--", PYTHON_EXE, "w.py"});
    CHECK(r.rc == 1);
    const auto at = r.err.find("dtrain: job failed");
    REQUIRE(at != std::string::npos);
    const std::string summary = r.err.substr(at);
    CAPTURE(summary);
    CHECK(summary.find_first_of("\x1b\r\x07") == std::string::npos);
    CHECK(summary.find("    | ValueError: ^[[2J^[]0;pwned^Gwiped^M\n") != std::string::npos);
    CHECK(summary.find("more bytes cut]\n") != std::string::npos);
    REQUIRE(r.summary.is_object());  // the JSON keeps the bytes, as JSON escapes
    CHECK(r.summary["root_cause"]["error"]["message"] == "ValueError: \x1b[2J\x1b]0;pwned\x07wiped\r");
  }

  TEST_CASE("the real exception behind 100000 repeated Traceback headers") {
    TempDir t;
    write_file(t.path / "w.py", R"(import sys
sys.stderr.write("Traceback (most recent call last):\n" * 100000)
sys.stderr.write("  File \"w.py\", line 3, in <module>\nValueError: the root cause\nafter\n")
sys.exit(1)
)");
    auto r = launch(t, {"--nproc-per-node", "1", "--", PYTHON_EXE, "w.py"});
    CHECK(r.rc == 1);
    CHECK(r.err.find("  first exception on its stderr:\n    | Traceback (most recent call last):\n"
                     "    | ... (99999 more \"Traceback\" header lines left out)\n") != std::string::npos);
    CHECK(r.err.find("    | ValueError: the root cause\n") != std::string::npos);
    REQUIRE(r.summary.is_object());
    CHECK(r.summary["root_cause"]["first_exception"].back() == "ValueError: the root cause");
  }

  TEST_CASE("dtrain's lines start lines of their own: a worker's unterminated last line is ended first") {
    TempDir t;
    write_file(t.path / "w.py", R"(import os, sys, time
if os.environ["RANK"] == "1":
    sys.stderr.write("Traceback (most recent call last):\n  File \"w.py\"\nRuntimeError: no newline after this")
    sys.stderr.flush()
    sys.exit(3)
time.sleep(30)
)");
    auto r = launch(t, {"--nproc-per-node", "2", "--grace", "2", "--", PYTHON_EXE, "w.py"});
    CHECK(r.rc == 3);
    CHECK(r.err.find("[0/1] RuntimeError: no newline after this\n") != std::string::npos);
    for (const auto& line : lines_of(r.err)) {
      CAPTURE(line);
      bool ours = line.rfind("dtrain: ", 0) == 0 || line.rfind("  ", 0) == 0;
      CHECK((ours || line.rfind("[0/", 0) == 0));
      if (!ours) CHECK(line.find("dtrain") == std::string::npos);
    }
    CHECK(count(r.err, "root cause") == 1);
    CHECK(count(r.err, "RuntimeError: no newline after this") == 2);  // its line, and the summary's
  }
}

TEST_SUITE("agent::failure_summary_record") {
  TEST_CASE("@record: the summary shows the error file's message and traceback") {
    TempDir t;
    write_worker(t, true, 0);  // one rank: each imports torch, which takes seconds
    auto r = launch(t, {"--nproc-per-node", "1", "--log-dir", t / "logs", "--", PYTHON_EXE, "worker.py"});
    CHECK(r.rc == 1);
    std::string f0 = slurp(t.path / "error-file-0");
    CHECK(r.err.find(fmt::format("  its error file ({}):\n    | Traceback (most recent call last):\n", f0)) !=
          std::string::npos);
    CHECK(r.err.find("raise ValueError(\"bad value on rank 0\")") != std::string::npos);
    CHECK(r.err.find("    | ValueError: bad value on rank 0\n") != std::string::npos);
    CHECK(r.err.find("    | atexit line") == std::string::npos);
    REQUIRE(r.summary.is_object());
    const auto& e = r.summary["root_cause"]["error"];
    CHECK(e["source"] == "error_file");
    CHECK(e["message"] == "ValueError: bad value on rank 0");
    CHECK(e["traceback"].get<std::string>().find("raise ValueError") != std::string::npos);
    CHECK_FALSE(e["timestamp"].get<std::string>().empty());
    // kept logs keep the error files: <log dir>/<run id>/attempt-0/0/error.json
    CHECK(f0.rfind((t.path / "logs").string(), 0) == 0);
    CHECK(std::filesystem::exists(f0));
    CHECK(r.summary["root_cause"]["error_file"] == f0);
  }
}
