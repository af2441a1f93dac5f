// The guardian (agent/src/shim.c), reached both as the dtrain-shim program and as the dtrain
// binary's `__guard`: no process of the job outlives a SIGKILLed agent; with the agent's "all
// clear" it kills only the groups still listed. (An exec failure of a worker is reported with its
// errno either way: the agent forks and execs the workers itself, spawn.hpp.)
#include <doctest/doctest.h>

#include <signal.h>

#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>

#include "../cli/run_binary.hpp"
#include "agent_test_util.hpp"
#include "dtrain/common/exit_codes.hpp"

using namespace agent_test;

TEST_SUITE("agent::shim") {
  TEST_CASE("the `dtrain __guard` fallback behaves as dtrain-shim") {
    for (std::string shim : {"self", ""}) {
      CAPTURE(shim);
      TempDir t;
      std::string marker = unique_marker();
      auto plan = sh_plan(2, "sleep 300 & touch \"$T/up.$RANK\"; exec sleep 301", t);
      plan.spec.env["DTRAIN_TEST_MARKER"] = marker;
      auto o = options(plan, t);
      o.shim = shim;
      pid_t a = fork_agent(o, t);
      REQUIRE(wait_until([&] { return all_files(t, "up.", 2); }, 30));
      ::kill(a, SIGKILL);
      CHECK(wait_child(a, 30) == 128 + SIGKILL);
      CHECK(wait_until([&] { return procs_with_env(marker).empty(); }, 30));

      write_file(t.path / "bad.sh", "#!/nonexistent/interpreter\n", true);
      auto bad = sh_plan(1, "", t);
      bad.spec.command = {(t.path / "bad.sh").string()};
      auto ob = options(bad, t);
      ob.shim = shim;
      auto r = run_agent(ob, t);
      CHECK(r.rc == 127);
      REQUIRE(r.result.root_cause);
      CHECK(r.result.root_cause->exec_errno == ENOENT);
    }
  }

  TEST_CASE("agent SIGKILLed: its guardian removes the temporary run folder and checkpoint folder") {
    TempDir t;
    auto plan = sh_plan(1, "dirname \"$DTRAIN_PLAN\" > \"$T/run\"; echo \"$DTRAIN_CHECKPOINT_DIR\" > \"$T/ckpt\";"
                           " touch \"$DTRAIN_CHECKPOINT_DIR/step-1.ckpt\" \"$T/up.0\"; exec sleep 300", t);
    pid_t a = fork_agent(options(plan, t), t);
    REQUIRE(wait_until([&] { return all_files(t, "up.", 1); }, 30));
    const fs::path run = lines_of(slurp(t.path / "run")).at(0), ckpt = lines_of(slurp(t.path / "ckpt")).at(0);
    CHECK(fs::exists(run / "plan.json"));
    CHECK(fs::exists(ckpt / "step-1.ckpt"));
    ::kill(a, SIGKILL);
    CHECK(wait_child(a, 30) == 128 + SIGKILL);
    CHECK(wait_until([&] { return !fs::exists(run) && !fs::exists(ckpt); }, 10));
  }

  TEST_CASE("misuse: both helpers say they are internal and exit with the usage status") {
    const std::string shim = std::string(DTRAIN_BINARY_DIR) + "/dtrain-shim";
    struct Row {
      std::vector<std::string> argv;
      std::string says;
    };
    const Row rows[] = {
        {{shim}, "dtrain-shim: internal helper of dtrain launch"},
        {{shim, "exec", "1"}, "dtrain-shim: internal helper of dtrain launch"},
        {{shim, "exec", "1", "--", "/bin/echo", "ran"}, "dtrain-shim: internal helper of dtrain launch"},
    };
    for (const auto& row : rows) {
      CAPTURE(row.says);
      auto r = dtrain::test::run(row.argv);
      CHECK(r.status == dtrain::exit_code::usage);
      CHECK(r.err.find(row.says) != std::string::npos);
      CHECK(r.out.empty());
    }
  }

  TEST_CASE("guard: at EOF the listed groups die; the marker is searched for unless the agent said all clear") {
    const std::string shim = std::string(DTRAIN_BINARY_DIR) + "/dtrain-shim";
    // Two processes: one leads its own group (listed), one carries the marker in its environment.
    auto start = [](const std::string& env) {
      pid_t p = ::fork();
      REQUIRE(p >= 0);
      if (p == 0) {
        ::setsid();
        std::string e = env;
        char* envp[] = {e.data(), nullptr};
        char* argv[] = {const_cast<char*>("/bin/sleep"), const_cast<char*>("60"), nullptr};
        ::execve(argv[0], argv, envp);
        ::_exit(127);
      }
      return p;
    };
    for (bool all_clear : {false, true}) {
      CAPTURE(all_clear);
      std::string id = unique_marker();
      pid_t grouped = start("X=1"), marked = start("DTRAIN_AGENT_ID=" + id);
      REQUIRE(wait_until([&] { return !procs_with_env("DTRAIN_AGENT_ID=" + id).empty(); }, 10));
      TempDir t;
      const fs::path folder = t.path / "dtrain-run-x", stranger = t.path / "other";
      fs::create_directories(folder / "checkpoint");
      write_file(folder / "checkpoint" / "step-1.ckpt", "x");
      fs::create_directories(stranger);
      ::symlink(stranger.c_str(), (folder / "link").c_str());  // followed never
      std::string lines = fmt::format("={}\n+{}\n#{}\n#{}\n{}", id, grouped, folder.string(), stranger.string(),
                                      all_clear ? ".\n" : "");
      int in[2];
      REQUIRE(::pipe(in) == 0);
      pid_t guard = ::fork();
      REQUIRE(guard >= 0);
      if (guard == 0) {
        ::dup2(in[0], 0);
        ::close(in[1]);
        ::execl(shim.c_str(), shim.c_str(), "guard", static_cast<char*>(nullptr));
        ::_exit(127);
      }
      ::close(in[0]);
      CHECK(::write(in[1], lines.data(), lines.size()) == static_cast<ssize_t>(lines.size()));
      ::close(in[1]);  // EOF: as when the agent ends or dies
      CHECK(wait_child(guard, 30) == 0);
      CHECK(wait_child(grouped, 30) == 128 + SIGKILL);
      if (all_clear) {
        CHECK(pid_alive(marked));
        ::kill(marked, SIGKILL);
      }
      CHECK(wait_child(marked, 30) == 128 + SIGKILL);
      CHECK(fs::exists(folder) == all_clear);  // removed with its contents unless all clear
      CHECK(fs::is_directory(stranger));       // not a folder of the agent's (name), not through the link
    }
  }
}
