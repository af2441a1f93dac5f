// The dtrain front end as a user meets it: --version, help, unknown commands, env.
#include <doctest/doctest.h>

#include <string>

#include "run_binary.hpp"

using dtrain::test::base_env;
using dtrain::test::run;

TEST_SUITE("cli::app") {
  TEST_CASE("--version prints the version and exits 0") {
    auto r = run({DTRAIN_BIN, "--version"});
    CHECK(r.status == 0);
    CHECK(r.out == "dtrain " DTRAIN_VERSION "\n");
  }

  TEST_CASE("help, help COMMAND, --help") {
    auto r = run({DTRAIN_BIN, "help"});
    CHECK(r.status == 0);
    CHECK(r.out.find("plan") != std::string::npos);
    CHECK(r.out.find("Subcommands:") != std::string::npos);
    r = run({DTRAIN_BIN, "help", "plan"});
    CHECK(r.status == 0);
    for (const char* flag : {"--json", "--nodes", "--node-rank", "--nproc-per-node", "--rdzv", "--token-file", "--set"})
      CHECK_MESSAGE(r.out.find(flag) != std::string::npos, flag);
    CHECK(run({DTRAIN_BIN, "plan", "--help"}).out.find("--nproc-per-node") != std::string::npos);
    r = run({DTRAIN_BIN, "help", "plna"});
    CHECK(r.status == 2);
    CHECK(r.err.find("did you mean 'plan'?") != std::string::npos);
    r = run({DTRAIN_BIN, "--help"});
    CHECK(r.status == 0);
    CHECK(r.out.find("Exit status") != std::string::npos);
  }

  TEST_CASE("unknown commands: did you mean, exit 2") {
    auto r = run({DTRAIN_BIN, "plna", "job.json"});
    CHECK(r.status == 2);
    CHECK(r.err.find("unknown command 'plna'; did you mean 'plan'?") != std::string::npos);
    r = run({DTRAIN_BIN, "pla"});
    CHECK(r.status == 2);
    CHECK(r.err.find("did you mean 'plan'?") != std::string::npos);
    r = run({DTRAIN_BIN, "frobnicate"});
    CHECK(r.status == 2);
    CHECK(r.err.find("unknown command 'frobnicate'; commands: ") != std::string::npos);
    r = run({DTRAIN_BIN});
    CHECK(r.status == 2);
    r = run({DTRAIN_BIN, "--no-such-flag"});
    CHECK(r.status == 2);
  }

  TEST_CASE("env lists the DTRAIN_* registry with defaults and current values") {
    auto env = base_env();
    env["DTRAIN_LOG"] = "debug";
    env["DTRAIN_RDZV_TOKEN"] = "s3cret-value";
    auto r = run({DTRAIN_BIN, "env"}, env);
    CHECK(r.status == 0);
    CHECK(r.out.find("DTRAIN_LOG") != std::string::npos);
    CHECK(r.out.find("[now: debug]") != std::string::npos);
    CHECK(r.out.find("DTRAIN_TEST_GPUS") != std::string::npos);
    CHECK(r.out.find("s3cret-value") == std::string::npos);  // a token is never printed
    CHECK(r.out.find("[now: set, not shown]") != std::string::npos);
  }
}
