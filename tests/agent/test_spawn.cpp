// Starting a process without waiting for its exec (agent/src/spawn.cpp): what the child gets (its
// own session, stdio, env, workdir, default signals), the command found as execvp finds it, how a
// failure is reported, PR_SET_PDEATHSIG, and a detached start that leaves the process nobody's
// child here.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

#include "agent_test_util.hpp"
#include "spawn.hpp"

using namespace agent_test;
using dtrain::agent::spawn_detached;
using dtrain::agent::spawn_process;
using dtrain::agent::SpawnFailure;
using dtrain::agent::SpawnRequest;
using dtrain::agent::SpawnStep;

namespace {

// `sh -c script` with env `env`, stdout into a pipe; returns the child's output and wait status.
struct Spawned {
  pid_t pid = -1;
  std::string out;
  int status = -1;
  std::vector<SpawnFailure> failures;
};

// `file` run with `argv`, env `env`, stdout into a pipe.
Spawned run(const char* file, std::vector<std::string> argv, std::vector<std::string> env, const char* cwd = nullptr,
            bool own_session = true, const std::vector<unsigned long>* cpu_mask = nullptr) {
  int out[2], status[2];
  REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(status, O_CLOEXEC) == 0);
  std::vector<char*> args, envp;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  SpawnRequest r;
  r.file = file;
  r.argv = args.data();
  r.envp = envp.data();
  r.cwd = cwd;
  r.stdio[1] = out[1];
  r.status_fd = status[1];
  r.own_session = own_session;
  if (cpu_mask != nullptr) {
    r.cpu_mask = cpu_mask->data();
    r.cpu_mask_bytes = cpu_mask->size() * sizeof(unsigned long);
  }
  Spawned s;
  s.pid = spawn_process(r);
  ::close(out[1]);
  ::close(status[1]);
  REQUIRE(s.pid > 0);
  char buf[4096];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) s.out.append(buf, static_cast<std::size_t>(n));
  REQUIRE(::waitpid(s.pid, &s.status, 0) == s.pid);
  SpawnFailure f;
  while (::read(status[0], &f, sizeof f) == static_cast<ssize_t>(sizeof f)) s.failures.push_back(f);
  ::close(out[0]);
  ::close(status[0]);
  return s;
}

Spawned run_sh(const std::string& script, std::vector<std::string> env, const char* cwd = nullptr,
               const char* file = "/bin/sh", bool own_session = true) {
  return run(file, {file, "-c", script}, std::move(env), cwd, own_session);
}

}  // namespace

TEST_SUITE("agent::spawn") {
  TEST_CASE("the child: its own session and group, stdin /dev/null, the env and workdir it was given") {
    TempDir t;
    auto s = run_sh("read x; echo \"stdin:$x:$?\"; echo \"$V\"; pwd; read a b c d e f rest < /proc/$$/stat; echo $e $f",
                    {"V=from-env", "PATH=/usr/bin:/bin"}, t.path.c_str());
    REQUIRE(WIFEXITED(s.status));
    CHECK(WEXITSTATUS(s.status) == 0);
    auto lines = lines_of(s.out);
    REQUIRE(lines.size() == 4);
    CHECK(lines[0] == "stdin::1");  // end of file at once
    CHECK(lines[1] == "from-env");
    CHECK(fs::equivalent(lines[2], t.path));
    CHECK(lines[3] == std::to_string(s.pid) + " " + std::to_string(s.pid));  // pgrp, session
    CHECK(s.failures.empty());
  }

  TEST_CASE("without own_session: a process group of its own in the parent's session") {
    auto s = run_sh("read a b c d e f rest < /proc/$$/stat; echo $e $f", {"PATH=/usr/bin:/bin"}, nullptr, "/bin/sh",
                    false);
    REQUIRE(WIFEXITED(s.status));
    CHECK(WEXITSTATUS(s.status) == 0);
    CHECK(s.out == std::to_string(s.pid) + " " + std::to_string(::getsid(0)) + "\n");  // pgrp, session
    CHECK(s.failures.empty());
  }

  TEST_CASE("signals: defaults and none blocked, whatever the parent ignores or blocks") {
    struct sigaction ign {}, old_int {}, old_pipe {};
    ign.sa_handler = SIG_IGN;
    ::sigaction(SIGINT, &ign, &old_int);
    ::sigaction(SIGPIPE, &ign, &old_pipe);
    sigset_t usr, old_mask;
    sigemptyset(&usr);
    sigaddset(&usr, SIGUSR1);
    ::pthread_sigmask(SIG_BLOCK, &usr, &old_mask);
    auto s = run_sh("exec grep -E '^Sig(Ign|Blk)' /proc/self/status", {"PATH=/usr/bin:/bin"});
    ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    ::sigaction(SIGINT, &old_int, nullptr);
    ::sigaction(SIGPIPE, &old_pipe, nullptr);
    CHECK(s.out == "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
  }

  TEST_CASE("cpu_mask: the child runs on those CPUs; a mask of none fails its set-up as step cpus") {
    cpu_set_t mine;
    REQUIRE(::sched_getaffinity(0, sizeof mine, &mine) == 0);
    int last = -1;
    for (int i = 0; i < CPU_SETSIZE; ++i)
      if (CPU_ISSET(i, &mine)) last = i;
    REQUIRE(last >= 0);
    const std::size_t bits = 8 * sizeof(unsigned long);
    std::vector<unsigned long> mask(static_cast<std::size_t>(last) / bits + 1);
    mask[static_cast<std::size_t>(last) / bits] = 1UL << (static_cast<std::size_t>(last) % bits);
    auto s = run("/bin/sh", {"sh", "-c", "grep Cpus_allowed_list /proc/self/status"}, {"PATH=/usr/bin:/bin"}, nullptr,
                 true, &mask);
    CHECK(s.out == "Cpus_allowed_list:\t" + std::to_string(last) + "\n");
    CHECK(s.failures.empty());
    std::vector<unsigned long> none(mask.size());
    s = run("/bin/sh", {"sh", "-c", "exit 0"}, {"PATH=/usr/bin:/bin"}, nullptr, true, &none);
    REQUIRE(s.failures.size() == 1);
    CHECK(s.failures[0].err == EINVAL);
    CHECK(s.failures[0].step == SpawnStep::cpus);
    CHECK(WEXITSTATUS(s.status) == 126);
  }

  TEST_CASE("a failed exec or workdir: one record with pid, errno and step; exit 127 or 126") {
    TempDir t;
    write_file(t.path / "plain", "not a program\n", false);
    struct Row {
      const char* file;
      const char* cwd;
      int err, status;
      SpawnStep step;
    };
    std::string missing = (t.path / "missing").string(), plain = (t.path / "plain").string();
    const Row rows[] = {
        {"dtrain-no-such-program", nullptr, ENOENT, 127, SpawnStep::exec},
        {plain.c_str(), nullptr, EACCES, 126, SpawnStep::exec},
        {"/bin/sh", missing.c_str(), ENOENT, 127, SpawnStep::workdir},
    };
    for (const auto& row : rows) {
      CAPTURE(row.file);
      auto s = run_sh("exit 0", {"PATH=/usr/bin:/bin"}, row.cwd, row.file);
      REQUIRE(WIFEXITED(s.status));
      CHECK(WEXITSTATUS(s.status) == row.status);
      REQUIRE(s.failures.size() == 1);
      CHECK(s.failures[0].pid == s.pid);
      CHECK(s.failures[0].err == row.err);
      CHECK(s.failures[0].step == row.step);
    }
  }

  TEST_CASE("the command is looked up along the child's PATH, not ours") {
    TempDir t;
    write_file(t.path / "dtrain-spawn-test-tool", "#!/bin/sh\necho tool ran\n", true);
    auto s = run_sh("", {"PATH=" + t.path.string() + ":/usr/bin:/bin"}, nullptr, "dtrain-spawn-test-tool");
    CHECK(s.out == "tool ran\n");
    CHECK(s.failures.empty());
  }

  TEST_CASE("as execvp: a program without #! runs through /bin/sh with its arguments, however many") {
    TempDir t;
    write_file(t.path / "dtrain-spawn-test-script", "echo \"$# $1 ${9999}\"\n", true);
    std::vector<std::string> argv{"dtrain-spawn-test-script"};
    for (int i = 1; i <= 9999; ++i) argv.push_back("a" + std::to_string(i));
    auto s = run("dtrain-spawn-test-script", argv, {"PATH=/nonexistent:" + t.path.string()});
    CHECK(s.out == "9999 a1 a9999\n");
    CHECK(s.failures.empty());
  }

  TEST_CASE("as execvp: the first executable match along PATH wins; only unexecutable ones: EACCES") {
    TempDir t;
    fs::create_directories(t.path / "a");
    fs::create_directories(t.path / "b");
    write_file(t.path / "a" / "dtrain-spawn-test-tool", "#!/bin/sh\necho a\n", false);
    write_file(t.path / "b" / "dtrain-spawn-test-tool", "#!/bin/sh\necho b\n", true);
    const std::string a = (t.path / "a").string(), b = (t.path / "b").string();
    auto s = run("dtrain-spawn-test-tool", {"dtrain-spawn-test-tool"}, {"PATH=" + a + "::" + b});
    CHECK(s.out == "b\n");
    CHECK(s.failures.empty());
    s = run("dtrain-spawn-test-tool", {"dtrain-spawn-test-tool"}, {"PATH=" + a + ":/nonexistent"});
    REQUIRE(WIFEXITED(s.status));
    CHECK(WEXITSTATUS(s.status) == 126);
    REQUIRE(s.failures.size() == 1);
    CHECK(s.failures[0].err == EACCES);
    CHECK(s.failures[0].step == SpawnStep::exec);
  }

  TEST_CASE("as execvp: without PATH in the child's environment, /bin:/usr/bin") {
    auto s = run("sh", {"sh", "-c", "echo ran"}, {"V=1"});
    CHECK(s.out == "ran\n");
    CHECK(s.failures.empty());
  }

  TEST_CASE("die_with_parent: the child is killed when the process that started it dies") {
    int report[2];
    REQUIRE(::pipe(report) == 0);
    pid_t parent = ::fork();
    REQUIRE(parent >= 0);
    if (parent == 0) {
      char sleep_path[] = "/bin/sleep", secs[] = "60";
      char* argv[] = {sleep_path, secs, nullptr};
      char* envp[] = {nullptr};
      SpawnRequest r;
      r.file = sleep_path;
      r.argv = argv;
      r.envp = envp;
      r.die_with_parent = true;
      pid_t child = spawn_process(r);
      ssize_t n = ::write(report[1], &child, sizeof child);
      ::_exit(n == sizeof child ? 0 : 1);
    }
    ::close(report[1]);
    pid_t child = 0;
    REQUIRE(::read(report[0], &child, sizeof child) == static_cast<ssize_t>(sizeof child));
    ::close(report[0]);
    CHECK(wait_child(parent, 30) == 0);
    CHECK(child > 0);
    CHECK(wait_until([&] { return !pid_alive(child); }, 30));
  }

  TEST_CASE("spawn_detached: the process is not our child, and the intermediate is") {
    int out[2];
    REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
    char sh[] = "/bin/sh", c[] = "-c", script[] = "echo $$ $PPID";
    char* argv[] = {sh, c, script, nullptr};
    char* envp[] = {nullptr};
    SpawnRequest r;
    r.file = sh;
    r.argv = argv;
    r.envp = envp;
    r.stdio[1] = out[1];
    pid_t mid = spawn_detached(r);
    REQUIRE(mid > 0);
    CHECK(wait_child(mid, 30) == 0);
    ::close(out[1]);
    std::string text;
    char buf[256];
    for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
    ::close(out[0]);
    long pid = 0, ppid = 0;
    REQUIRE(std::sscanf(text.c_str(), "%ld %ld", &pid, &ppid) == 2);
    CHECK(ppid != ::getpid());
    errno = 0;
    CHECK(::waitpid(static_cast<pid_t>(pid), nullptr, WNOHANG) == -1);
    CHECK(errno == ECHILD);
  }
}
