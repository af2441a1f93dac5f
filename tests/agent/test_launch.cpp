// `dtrain launch` through the real binary: job files, overrides, -- args, flags, exit statuses,
// the embedded store, and no survivors when the launcher itself is SIGKILLed.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "agent_test_util.hpp"
#include "test_needs.hpp"

using namespace agent_test;

namespace {

// A 64 KiB tmpfs can be mounted in a mount namespace of our own (as root, or in a user namespace).
const dtrain::test::Need need_tmpfs("tmpfs", [] {
  const char* cmd = ::geteuid() == 0 ? "unshare -m sh -c 'mount -t tmpfs -o size=64k tmpfs /mnt' 2>&1"
                                     : "unshare -rm sh -c 'mount -t tmpfs -o size=64k tmpfs /mnt' 2>&1";
  std::string out;
  FILE* p = ::popen(cmd, "r");
  if (p == nullptr) return std::string("cannot run unshare");
  char buf[256];
  while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  int rc = ::pclose(p);
  return rc == 0 ? std::string() : "cannot mount a small tmpfs in a mount namespace here: " + out;
});

struct Launch {
  pid_t pid = -1;
  int rc = -1;
  std::string out, err;
};

// How the launcher process is started: under an open-files limit, as user nobody (when we are root).
struct StartAs {
  long nofile = 0;
  bool nobody = false;
};

// Starts `dtrain ARGS...` with stdout/stderr in files of t; cwd is t.
pid_t start(const TempDir& t, const std::vector<std::string>& args, const std::map<std::string, std::string>& extra_env = {},
            StartAs as = {}) {
  std::vector<std::string> env_strings = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "DTRAIN_TEST_GPUS=0",
                                          "LC_ALL=C"};
  for (const auto& [k, v] : extra_env) env_strings.push_back(k + "=" + v);
  std::vector<std::string> argv_s = {DTRAIN_BIN};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::string out = t / "launch.out", err = t / "launch.err";
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  std::vector<char*> argv, envp;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  int n = ::open("/dev/null", O_RDONLY);
  ::dup2(o, 1);
  ::dup2(e, 2);
  ::dup2(n, 0);
  if (::chdir(t.path.c_str()) != 0) _exit(126);
  if (as.nofile > 0) {
    rlimit r{rlim_t(as.nofile), rlim_t(as.nofile)};
    if (::setrlimit(RLIMIT_NOFILE, &r) != 0) _exit(125);
  }
  if (as.nobody && ::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) _exit(125);
  ::execve(argv[0], argv.data(), envp.data());
  _exit(127);
}

Launch launch(const TempDir& t, const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {},
              StartAs as = {}) {
  Launch l;
  l.pid = start(t, args, env, as);
  l.rc = wait_child(l.pid, 120);
  if (l.rc < 0) ::kill(l.pid, SIGKILL), wait_child(l.pid, 10);
  l.out = slurp(t.path / "launch.out");
  l.err = slurp(t.path / "launch.err");
  return l;
}

std::string job(const TempDir& t, const std::string& script, int nproc, const std::string& more = "") {
  std::string esc;
  for (char c : script) {
    if (c == '"' || c == '\\') esc += '\\';
    esc += c;
  }
  std::string text = fmt::format(R"({{"command": ["sh", "-c", "{}", "sh"], "cluster": {{"procs_per_instance": {}}}{}}})",
                                 esc, nproc, more);
  write_file(t.path / "job.json", text);
  return (t.path / "job.json").string();
}

}  // namespace

TEST_SUITE("agent::launch") {
  TEST_CASE("the built-in demo job runs ranked workers and exits 0") {
    TempDir t;
    auto l = launch(t, {"launch"});
    CHECK(l.rc == 0);
    CHECK(l.out.find("[0/0] rank 0/2 on node 0") != std::string::npos);
    CHECK(l.out.find("[0/1] rank 1/2 on node 0") != std::string::npos);
  }

  TEST_CASE("exit code propagation, -- args, overrides and the summary") {
    TempDir t;
    auto j = job(t, "if [ \"$RANK\" = 2 ]; then echo \"failing with $1\" >&2; exit 3; fi; exec sleep 60", 2);
    auto l = launch(t, {"launch", j, "--nproc-per-node", "4", "--grace", "2", "--summary-json", t / "s.json", "--", "arg-one"});
    CHECK(l.rc == 3);
    CHECK(l.err.find("[0/2] failing with arg-one") != std::string::npos);
    CHECK(l.err.find("root cause: rank 2 (local rank 2") != std::string::npos);
    CHECK(l.err.find("| failing with arg-one") != std::string::npos);
    CHECK(slurp(t.path / "s.json").find("\"rank\": 2") != std::string::npos);
  }

  TEST_CASE("env from the binary: contract, spec env, embedded store, plan file") {
    TempDir t;
    auto j = job(t, "env > \"out.$RANK\"; cat \"$DTRAIN_PLAN\" > \"plan.$RANK\"", 2,
                 R"(, "env": {"FROM_SPEC": "yes"}, "batch": {"per_replica": 4, "dataset_size": 80}, "restart": {"max_restarts": 1})");
    auto l = launch(t, {"launch", j});
    REQUIRE(l.rc == 0);
    for (int r = 0; r < 2; ++r) {
      auto env = slurp(t.path / ("out." + std::to_string(r)));
      CHECK(env.find("\nRANK=" + std::to_string(r) + "\n") != std::string::npos);
      CHECK(env.find("FROM_SPEC=yes") != std::string::npos);
      CHECK(env.find("DTRAIN_STORE_ADDR=127.0.0.1:") != std::string::npos);
      CHECK(env.find("DTRAIN_STORE_TOKEN=") != std::string::npos);
      CHECK(env.find("DTRAIN_GLOBAL_BATCH=8") != std::string::npos);
      CHECK(env.find("DTRAIN_ITERATIONS_PER_EPOCH=10") != std::string::npos);
      CHECK(env.find("TORCHELASTIC_MAX_RESTARTS=1") != std::string::npos);
      CHECK(slurp(t.path / ("plan." + std::to_string(r))).find("\"world_size\": 2") != std::string::npos);
    }
  }

  TEST_CASE("--ranks, --no-tag, log files") {
    TempDir t;
    auto j = job(t, "echo \"line of $RANK\"", 4);
    auto l = launch(t, {"launch", j, "--ranks", "1,3", "--no-tag", "--log-dir", "logs"});
    REQUIRE(l.rc == 0);
    auto ls = lines_of(l.out);
    std::sort(ls.begin(), ls.end());
    CHECK(ls == std::vector<std::string>{"line of 1", "line of 3"});
    std::vector<fs::path> runs;
    for (const auto& e : fs::directory_iterator(t.path / "logs")) runs.push_back(e.path());
    REQUIRE(runs.size() == 1);
    CHECK(slurp(runs[0] / "attempt-0" / "rank-0.out") == "line of 0\n");
    CHECK(fs::exists(runs[0] / "plan.json"));
  }

  TEST_CASE("usage errors exit 2 with a clear message") {
    TempDir t;
    auto j = job(t, "true", 2);
    auto l = launch(t, {"launch", j, "--ranks", "0,7"});
    CHECK(l.rc == 2);
    CHECK(l.err.find("--ranks 0,7") != std::string::npos);
    auto l2 = launch(t, {"launch", "no-such-job.json"});
    CHECK(l2.rc == 2);
  }

  TEST_CASE("bad command through the binary: 127 and 126") {
    TempDir t;
    write_file(t.path / "job.json", R"({"command": ["no-such-program-dtrain-test"]})");
    auto l = launch(t, {"launch", t / "job.json"});
    CHECK(l.rc == 127);
    CHECK(l.err.find("command not found: 'no-such-program-dtrain-test'") != std::string::npos);
    write_file(t.path / "w.sh", "#!/bin/sh\n", false);
    write_file(t.path / "job2.json", R"({"command": ["./w.sh"]})");
    auto l2 = launch(t, {"launch", t / "job2.json"});
    CHECK(l2.rc == 126);
    CHECK(l2.err.find("not executable") != std::string::npos);
  }

  TEST_CASE("launcher SIGKILLed: nothing of the job survives") {
    TempDir t;
    std::string marker = unique_marker();
    auto j = job(t, "sleep 300 & touch \"up.$RANK\"; exec sleep 301", 3, fmt::format(R"(, "env": {{"M": "{}"}})", marker));
    pid_t pid = start(t, {"launch", j});
    REQUIRE(wait_until([&] { return fs::exists(t.path / "up.0") && fs::exists(t.path / "up.1") && fs::exists(t.path / "up.2"); }, 60));
    // 3 workers + 3 background sleeps; a `touch` that is still exiting may be seen for a moment.
    CHECK(wait_until([&] { return procs_with_env(marker).size() == 6; }, 30));
    ::kill(pid, SIGKILL);
    CHECK(wait_child(pid, 30) == 128 + SIGKILL);
    CHECK(wait_until([&] { return procs_with_env(marker).empty(); }, 30));
  }

  TEST_CASE("SIGTERM to the launcher: forwarded, 143") {
    TempDir t;
    auto j = job(t, "trap 'echo bye > \"bye.$RANK\"; exit 0' TERM; touch \"up.$RANK\"; while :; do sleep 0.05; done", 2);
    pid_t pid = start(t, {"launch", j});
    REQUIRE(wait_until([&] { return fs::exists(t.path / "up.0") && fs::exists(t.path / "up.1"); }, 60));
    ::kill(pid, SIGTERM);
    CHECK(wait_child(pid, 60) == 143);
    CHECK(fs::exists(t.path / "bye.0"));
    CHECK(fs::exists(t.path / "bye.1"));
  }

  TEST_CASE("a worker's child that calls setsid and ignores SIGTERM does not outlive the launcher") {
    // It leaves the worker's process group, so signals to the group miss it; the agent adopts it
    // (subreaper) once the worker is gone, and the guardian finds it through its parent links.
    std::string escape = "setsid sh -c 'trap \"\" TERM; touch esc.$RANK; exec sleep 300' & touch up.$RANK; exec sleep 301";
    // Two workers, each with an escaped child, then `sig` to the launcher; returns the marker.
    auto signalled = [&](const TempDir& t, int sig, int expect) {
      std::string marker = unique_marker();
      auto j = job(t, escape, 2, fmt::format(R"(, "env": {{"M": "{}"}}, "grace_s": 1)", marker));
      pid_t pid = start(t, {"launch", j});
      REQUIRE(wait_until([&] { return all_files(t, "up.", 2) && all_files(t, "esc.", 2); }, 60));
      CHECK(wait_until([&] { return procs_with_env(marker).size() == 4; }, 30));
      ::kill(pid, sig);
      CHECK(wait_child(pid, 60) == expect);
      return marker;
    };
    SUBCASE("SIGTERM to the launcher") {
      TempDir t;
      auto marker = signalled(t, SIGTERM, 143);
      CHECK(procs_with_env(marker).empty());  // gone by the time the launcher exits
    }
    SUBCASE("SIGKILL to the launcher") {
      TempDir t;
      auto marker = signalled(t, SIGKILL, 128 + SIGKILL);
      CHECK(wait_until([&] { return procs_with_env(marker).empty(); }, 30));  // the guardian's work
    }
    SUBCASE("the job succeeds while the escaped child still runs") {
      TempDir t;
      std::string marker = unique_marker();
      auto j = job(t, "setsid sh -c 'trap \"\" TERM; exec sleep 300' & sleep 0.2", 2, fmt::format(R"(, "env": {{"M": "{}"}})", marker));
      auto l = launch(t, {"launch", j});
      CHECK(l.rc == 0);
      CHECK(procs_with_env(marker).empty());
    }
  }

  TEST_CASE("a helper a worker daemonizes is left alone while the job runs") {
    TempDir t;
    // the helper leaves the group at once; the worker needs its file a second later
    auto j = job(t, "setsid sh -c 'sleep 1; touch helper.$RANK' & sleep 3; test -e helper.$RANK", 2);
    auto l = launch(t, {"launch", j});
    CHECK(l.rc == 0);
    CHECK(all_files(t, "helper.", 2));
  }

  TEST_CASE("binary garbage and endless lines on stdout cannot break the agent") {
    TempDir t;
    auto j = job(t, "head -c 2000000 /dev/urandom; echo; head -c 200000 /dev/zero | tr '\\000' x; echo; echo \"done $RANK\"", 2);
    auto l = launch(t, {"launch", j, "--log-dir", "logs"});
    CHECK(l.rc == 0);
    CHECK(l.out.find("[0/0] done 0\n") != std::string::npos);
    CHECK(l.out.find("[0/1] done 1\n") != std::string::npos);
    // 200,000 bytes without a newline: three marked pieces of 64 KiB, then the rest
    std::string mark = " [dtrain: line over 65536 bytes, cut here; it goes on in the next line]";
    std::string rank0;  // rank 0's lines in order (rank 1's may come between them)
    for (const auto& line : lines_of(l.out))
      if (line.rfind("[0/0] ", 0) == 0) rank0 += line + "\n";
    std::string piece = "[0/0] " + std::string(65536, 'x') + mark + "\n";
    CHECK(rank0.find(piece + piece + piece + "[0/0] " + std::string(200000 - 3 * 65536, 'x') + "\n") != std::string::npos);
    std::size_t longest = 0;
    for (const auto& line : lines_of(l.out)) longest = std::max(longest, line.size());
    CHECK(longest <= 65536 + mark.size() + 8);
    // the log files keep every byte as written
    std::vector<fs::path> runs;
    for (const auto& e : fs::directory_iterator(t.path / "logs")) runs.push_back(e.path());
    REQUIRE(runs.size() == 1);
    CHECK(fs::file_size(runs[0] / "attempt-0" / "rank-0.out") == 2000000 + 1 + 200000 + 1 + 7);
  }

  TEST_CASE("resource errors: a clear message, status 71, nothing left running") {
    SUBCASE("too many open files") {
      TempDir t;
      std::string marker = unique_marker();
      auto j = job(t, "touch \"up.$RANK\"; exec sleep 300", 16, fmt::format(R"(, "env": {{"M": "{}"}})", marker));
      // enough for the agent to start, not for 16 workers' pipes
      auto l = launch(t, {"launch", j}, {}, StartAs{40});
      INFO(l.err);
      CHECK(l.rc == 71);
      CHECK(l.err.find("Too many open files") != std::string::npos);
      CHECK(l.err.find("ulimit -n") != std::string::npos);
      CHECK(procs_with_env(marker).empty());
    }
    SUBCASE("an unreadable job spec") {
      TempDir t;
      auto j = job(t, "true", 1);
      ::chmod(j.c_str(), 0);
      ::chmod(t.path.c_str(), 0755);
      auto l = launch(t, {"launch", j}, {}, StartAs{0, true});
      INFO(l.err);
      CHECK(l.rc == 2);
      CHECK(l.err.find("cannot open: Permission denied") != std::string::npos);
    }
  }

  TEST_CASE("MASTER_PORT exported, or --master-port, reaches every worker exactly, as the plan says") {
    TempDir t;
    auto j = job(t, "echo \"$MASTER_PORT\" > \"port.$RANK\"; grep -o '\"master_port\": [0-9][0-9]*' \"$DTRAIN_PLAN\" > \"plan.$RANK\"", 2);
    auto l = launch(t, {"launch", j}, {{"MASTER_PORT", "29577"}});
    REQUIRE(l.rc == 0);
    for (int r = 0; r < 2; ++r) {
      CHECK(slurp(t.path / ("port." + std::to_string(r))) == "29577\n");
      CHECK(slurp(t.path / ("plan." + std::to_string(r))) == "\"master_port\": 29577\n");
    }
    l = launch(t, {"launch", j, "--master-port", "29578"}, {{"MASTER_PORT", "29577"}});
    REQUIRE(l.rc == 0);
    CHECK(slurp(t.path / "port.1") == "29578\n");
  }

  TEST_CASE("a successful run ends with one summary line and no warning") {
    TempDir t;
    auto j = job(t, "exit 0", 3);
    auto l = launch(t, {"launch", j});
    REQUIRE(l.rc == 0);
    auto lines = lines_of(l.err);
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].rfind("dtrain: job finished: 3 ranks exited 0 in ", 0) == 0);
    CHECK(lines[0].find("s (no restarts)") != std::string::npos);
    auto r = job(t, "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ] && [ \"$RANK\" = 1 ]; then exit 1; fi", 2,
                 R"(, "restart": {"max_restarts": 1})");
    l = launch(t, {"launch", r});
    REQUIRE(l.rc == 0);
    CHECK(l.err.find("dtrain: job finished: 2 ranks exited 0 in ") != std::string::npos);
    CHECK(l.err.find("(1 restart)") != std::string::npos);
  }

  TEST_CASE("--role sets ROLE_NAME; --redirects keeps streams off the terminal, in kept logs") {
    TempDir t;
    auto j = job(t, "echo \"out $ROLE_NAME $RANK\"; echo \"err $RANK\" >&2", 2);
    auto l = launch(t, {"launch", j, "--role", "trainer", "--redirects", "0:1", "--log-dir", "logs"});
    REQUIRE(l.rc == 0);
    CHECK(l.out.find("[0/1] out trainer 1") != std::string::npos);
    CHECK(l.out.find("out trainer 0") == std::string::npos);  // local rank 0's stdout: log file only
    CHECK(l.err.find("[0/0] err 0") != std::string::npos);
    std::vector<fs::path> runs;
    for (const auto& e : fs::directory_iterator(t.path / "logs")) runs.push_back(e.path());
    REQUIRE(runs.size() == 1);
    CHECK(slurp(runs[0] / "attempt-0" / "rank-0.out") == "out trainer 0\n");
    // without a log folder the logs are kept in the run's folder, which dtrain names
    auto tmp = t.path / "tmp";
    fs::create_directories(tmp);
    l = launch(t, {"launch", j, "--redirects", "3"}, {{"TMPDIR", tmp.string()}});
    REQUIRE(l.rc == 0);
    CHECK(l.out.empty());
    auto at = l.err.find("dtrain: logs in ");
    REQUIRE(at != std::string::npos);
    std::string dir = l.err.substr(at + 16, l.err.find('\n', at) - at - 16);
    CHECK(slurp(fs::path(dir) / "attempt-0" / "rank-1.err") == "err 1\n");
    auto bad = launch(t, {"launch", j, "--tee", "5"});
    CHECK(bad.rc == 2);
    CHECK(bad.err.find("--tee: '5' is not a stream choice; expected 0 (none), 1 (stdout), 2 (stderr) or 3 (both)") !=
          std::string::npos);
  }
}

// The one case that needs a small tmpfs in a mount namespace of its own: a ctest entry of its own
// (test_launch_disk_full, NEEDS tmpfs), so that where none can be made only it is skipped.
TEST_SUITE("agent::launch::disk_full") {
  TEST_CASE("resource errors: the log folder's disk is full: a clear message, status 71, nothing left running") {
    TempDir t;
    fs::create_directories(t.path / "small");
    std::string marker = unique_marker();
    auto j = job(t, "touch \"started.$RANK\"", 2, fmt::format(R"(, "env": {{"M": "{}"}})", marker));
    // A small tmpfs, filled up, in a mount namespace of its own (root or an unprivileged user
    // namespace: the need "tmpfs" checks that one can be made).
    std::string script = "mount -t tmpfs -o size=64k tmpfs small 2>/dev/null || "
                         "{ echo 'cannot mount a tmpfs here' >&2; exit 99; }; "
                         "dd if=/dev/zero of=small/fill bs=4k 2>/dev/null; exec \"$0\" \"$@\"";
    pid_t pid = ::fork();
    if (pid == 0) {
      int o = ::open((t.path / "launch.err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(o, 2);
      ::dup2(o, 1);
      if (::chdir(t.path.c_str()) != 0) _exit(126);
      std::vector<std::string> a = {"unshare", "-rm", "sh", "-c", script, DTRAIN_BIN, "launch", j, "--log-dir", "small/logs"};
      if (::geteuid() == 0) a = {"unshare", "-m", "sh", "-c", script, DTRAIN_BIN, "launch", j, "--log-dir", "small/logs"};
      std::vector<char*> argv;
      for (auto& s : a) argv.push_back(s.data());
      argv.push_back(nullptr);
      ::execvp("unshare", argv.data());
      _exit(98);
    }
    int rc = wait_child(pid, 60);
    std::string err = slurp(t.path / "launch.err");
    INFO(err);
    REQUIRE(rc != 98);  // unshare could not be started
    REQUIRE(rc != 99);  // no tmpfs in the mount namespace
    CHECK(rc == 71);
    CHECK(err.find("No space left on device") != std::string::npos);
    CHECK(err.find("free space there or choose another directory") != std::string::npos);
    CHECK_FALSE(fs::exists(t.path / "started.0"));  // nothing started
    CHECK(procs_with_env(marker).empty());
  }
}
