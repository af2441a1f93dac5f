// The worker exec shim and guardian (agent/src/shim.c), reached both as the dtrain-shim program and
// as the dtrain binary's `__exec` / `__guard`: no process of the job outlives a SIGKILLed agent, and
// an exec failure is reported with its errno.
#include <doctest/doctest.h>

#include <signal.h>

#include <cerrno>

#include "../cli/run_binary.hpp"
#include "agent_test_util.hpp"
#include "dtrain/common/exit_codes.hpp"

using namespace agent_test;

TEST_SUITE("agent::shim") {
  TEST_CASE("the `dtrain __exec` / `__guard` fallback behaves as dtrain-shim") {
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

  TEST_CASE("misuse: both helpers say they are internal and exit with the usage status") {
    const std::string shim = std::string(DTRAIN_BINARY_DIR) + "/dtrain-shim";
    struct Row {
      std::vector<std::string> argv;
      std::string says;
    };
    const Row rows[] = {
        {{shim}, "dtrain-shim: internal helper of dtrain launch"},
        {{shim, "exec", "1"}, "dtrain-shim: internal helper of dtrain launch"},
        {{shim, "exec", "1", "x", "true"}, "dtrain-shim: internal helper of dtrain launch"},
        {{DTRAIN_BIN, "__exec", "1"}, "dtrain __exec: internal helper of dtrain launch"},
    };
    for (const auto& row : rows) {
      CAPTURE(row.says);
      auto r = dtrain::test::run(row.argv);
      CHECK(r.status == dtrain::exit_code::usage);
      CHECK(r.err.find(row.says) != std::string::npos);
    }
    // not started by its agent: it does not run the command
    auto orphan = dtrain::test::run({shim, "exec", "1", "--", "/bin/echo", "ran"});
    CHECK(orphan.status == dtrain::exit_code::signal_base + SIGKILL);
    CHECK(orphan.out.empty());
  }
}
