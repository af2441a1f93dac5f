// What the workers are started with (agent/src/startup_context.cpp): the command with the launch's
// arguments, the workdir, what is refused before anything runs, and the env context each worker's
// environment is made from (run id, store, generation, MASTER_PORT, plan file, master address).
#include <doctest/doctest.h>

#include <unistd.h>

#include <fmt/format.h>

#include "agent_test_util.hpp"
#include "dtrain/common/errors.hpp"
#include "startup_context.hpp"

using namespace dtrain::agent;
using agent_test::TempDir;

namespace {

AgentOptions two_ranks(const TempDir& t) {
  AgentOptions o = agent_test::options(agent_test::sh_plan(2, "true", t), t);
  o.plan.spec.command = {"/bin/sh", "-c", "exit 0"};
  return o;
}

const EnvMap kBase{{"PATH", "/usr/bin:/bin"}, {"HOME", "/home/someone"}};

}  // namespace

TEST_SUITE("agent::startup_context") {
  TEST_CASE("the command is the spec's, then the launch's arguments; the workdir is absolute") {
    TempDir t;
    AgentOptions o = two_ranks(t);
    o.extra_args = {"--lr", "0.1"};
    o.plan.spec.workdir = t.path.string();
    StartupContext c(o, kBase);
    CHECK(c.command() == std::vector<std::string>{"/bin/sh", "-c", "exit 0", "--lr", "0.1"});
    CHECK(c.workdir() == t.path);
    o.plan.spec.workdir = "";
    CHECK(StartupContext(o, kBase).workdir().is_absolute());
  }

  TEST_CASE("refused before anything runs: no command, a workdir that is no folder, a bad tag format") {
    TempDir t;
    AgentOptions o = two_ranks(t);
    o.plan.spec.command.clear();
    CHECK_THROWS_AS(StartupContext(o, kBase), dtrain::ConfigError);
    o = two_ranks(t);
    o.plan.spec.workdir = (t.path / "no-such-folder").string();
    CHECK_THROWS_AS(StartupContext(o, kBase), dtrain::ConfigError);
    o = two_ranks(t);
    o.plan.spec.output.tag_format = "{no_such_field}";
    CHECK_THROWS_AS(StartupContext(o, kBase), dtrain::ConfigError);
    o = two_ranks(t);
    o.plan.spec.command = {"dtrain-no-such-command"};  // reported by the agent with status 127, not here
    CHECK_NOTHROW(StartupContext(o, kBase));
  }

  TEST_CASE("each worker's environment: the agent's own, the generation, MASTER_PORT, the store, the run folder") {
    TempDir t;
    AgentOptions o = two_ranks(t);
    o.plan.run_id = "";
    StartupContext c(o, kBase);
    CHECK(c.run_id() == fmt::format("dtrain-{}", ::getpid()));
    CHECK(c.agent_id().rfind(fmt::format("{}-", ::getpid()), 0) == 0);
    CHECK(c.shm_prefix() == fmt::format("dtrain-{}-", c.agent_id()));
    c.use_store("127.0.0.1:4567", "secret-token");
    c.use_run_folder("/run/plan.json", "/run/checkpoint");
    c.begin_generation(2, 29500);
    EnvMap env = c.worker_env(o.plan, o.plan.ranks[1]);
    CHECK(env["HOME"] == "/home/someone");
    CHECK(env["RANK"] == "1");
    CHECK(env["DTRAIN_GENERATION"] == "2");
    CHECK(env["TORCHELASTIC_RESTART_COUNT"] == "2");
    CHECK(env["MASTER_PORT"] == "29500");
    CHECK(env["MASTER_ADDR"] == "127.0.0.1");
    CHECK(env["DTRAIN_RUN_ID"] == c.run_id());
    CHECK(env["DTRAIN_STORE_ADDR"] == "127.0.0.1:4567");
    CHECK(env["DTRAIN_STORE_TOKEN"] == "secret-token");
    CHECK(env["DTRAIN_PLAN"] == "/run/plan.json");
    CHECK(env["DTRAIN_CHECKPOINT_DIR"] == "/run/checkpoint");
    CHECK(env["DTRAIN_AGENT_ID"] == c.agent_id());
    CHECK(env["DTRAIN_SHM_PREFIX"] == c.shm_prefix());
    auto elastic = o.plan;
    elastic.identity.master_addr = "10.0.0.7";
    c.adopt(elastic);
    CHECK(c.worker_env(elastic, elastic.ranks[0])["MASTER_ADDR"] == "10.0.0.7");
  }

  TEST_CASE("the interpreter of a Python command is looked up along the spec's PATH, else the agent's") {
    TempDir t;
    agent_test::write_file(t.path / "python3", "#!/bin/sh\n", true);
    AgentOptions o = two_ranks(t);
    o.plan.spec.command = {"python3", "train.py"};
    o.plan.spec.env["PATH"] = t.path.string();
    StartupContext c(o, kBase);
    CHECK(c.interpreter(o.plan) == (t.path / "python3").string());
    o.plan.spec.command = {"/bin/sh", "-c", "true"};
    CHECK(StartupContext(o, kBase).interpreter(o.plan).empty());
  }

  TEST_CASE("local_ranks: this node's ranks of the plan") {
    TempDir t;
    auto plan = agent_test::sh_plan(2, "true", t);
    plan.ranks = {{0, 0, 0}, {1, 0, 1}, {2, 1, 0}, {3, 1, 1}};
    plan.identity.node_rank = 1;
    CHECK(local_ranks(plan) == std::vector<int>{2, 3});
  }

  TEST_CASE("each local rank's GPU for the CPU binding: i, or the i-th of the CUDA_VISIBLE_DEVICES it inherits") {
    dtrain::config::Plan plan;
    CHECK(local_gpus(plan, {{"CUDA_VISIBLE_DEVICES", "2,3"}}, 2).empty());  // no GPUs in the job
    plan.use_gpus = true;
    CHECK(local_gpus(plan, {}, 2) == std::vector<int>{0, 1});
    CHECK(local_gpus(plan, {{"CUDA_VISIBLE_DEVICES", "2,3"}}, 3) == std::vector<int>{2, 3, -1});
    plan.spec.env["CUDA_VISIBLE_DEVICES"] = "5,GPU-8f2c";
    CHECK(local_gpus(plan, {{"CUDA_VISIBLE_DEVICES", "2,3"}}, 2) == std::vector<int>{5, -1});  // the spec's first
    plan.spec.cluster.bind_gpus = true;  // the worker's CUDA_VISIBLE_DEVICES is its local rank
    CHECK(local_gpus(plan, {{"CUDA_VISIBLE_DEVICES", "2,3"}}, 2) == std::vector<int>{0, 1});
  }
}
