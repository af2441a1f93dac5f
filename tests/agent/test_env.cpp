#include <doctest/doctest.h>

#include "dtrain/agent/env.hpp"

using namespace dtrain;

TEST_SUITE("agent::env") {
  TEST_CASE("contract variables for a rank on node 1 of 2") {
    config::Plan plan;
    plan.spec.command = {"true"};
    plan.world_size = 8;
    plan.instances = 2;
    plan.procs_per_instance = 4;
    plan.batch = config::BatchPlan{};
    plan.batch->global = 64;
    plan.batch->per_replica = 8;
    plan.batch->micro_batches = 2;
    plan.batch->micro_batch_size = 4;
    plan.batch->dataset_size = 640;
    plan.batch->epochs = 3;
    plan.batch->iterations_per_epoch = 10;
    plan.batch->total_iterations = 30;
    plan.spec.env = {{"FOO", "bar"}, {"RANK", "99"}};
    plan.spec.restart.max_restarts = 5;
    agent::EnvContext ctx;
    ctx.generation = 2;
    ctx.run_id = "r1";
    ctx.master_addr = "10.0.0.1";
    ctx.master_port = 29501;
    ctx.store_addr = "10.0.0.1:29400";
    ctx.store_token = "tok";
    ctx.local_addr = "10.0.0.2";
    ctx.plan_path = "/tmp/x/plan.json";
    ctx.cores = 8;
    auto env = agent::worker_env(plan, {6, 1, 2}, ctx, {{"PATH", "/bin"}, {"FOO", "base"}});
    CHECK(env.at("PATH") == "/bin");
    CHECK(env.at("FOO") == "bar");     // spec env over the agent's
    CHECK(env.at("RANK") == "6");      // the contract over spec env
    CHECK(env.at("LOCAL_RANK") == "2");
    CHECK(env.at("WORLD_SIZE") == "8");
    CHECK(env.at("LOCAL_WORLD_SIZE") == "4");
    CHECK(env.at("GROUP_RANK") == "1");
    CHECK(env.at("ROLE_RANK") == "6");
    CHECK(env.at("ROLE_WORLD_SIZE") == "8");
    CHECK(env.at("MASTER_ADDR") == "10.0.0.1");
    CHECK(env.at("MASTER_PORT") == "29501");
    CHECK(env.at("TORCHELASTIC_RESTART_COUNT") == "2");
    CHECK(env.at("TORCHELASTIC_MAX_RESTARTS") == "5");
    CHECK(env.at("TORCHELASTIC_RUN_ID") == "r1");
    CHECK(env.at("DTRAIN_RUN_ID") == "r1");
    CHECK(env.at("DTRAIN_GENERATION") == "2");
    CHECK(env.at("DTRAIN_NODE_RANK") == "1");
    CHECK(env.at("DTRAIN_NNODES") == "2");
    CHECK(env.at("DTRAIN_WORLD_SIZE") == "8");
    CHECK(env.at("DTRAIN_STORE_ADDR") == "10.0.0.1:29400");
    CHECK(env.at("DTRAIN_STORE_TOKEN") == "tok");
    CHECK(env.at("DTRAIN_LOCAL_ADDR") == "10.0.0.2");
    CHECK(env.at("DTRAIN_GLOBAL_BATCH") == "64");
    CHECK(env.at("DTRAIN_PER_REPLICA_BATCH") == "8");
    CHECK(env.at("DTRAIN_MICRO_BATCHES") == "2");
    CHECK(env.at("DTRAIN_MICRO_BATCH_SIZE") == "4");
    CHECK(env.at("DTRAIN_DATASET_SIZE") == "640");
    CHECK(env.at("DTRAIN_EPOCHS") == "3");
    CHECK(env.at("DTRAIN_ITERATIONS_PER_EPOCH") == "10");
    CHECK(env.at("DTRAIN_TOTAL_ITERATIONS") == "30");
    CHECK(env.at("DTRAIN_PLAN") == "/tmp/x/plan.json");
    CHECK(env.count("DTRAIN_CHECKPOINT_DIR") == 0);  // only when the agent gives one
    ctx.checkpoint_dir = "/tmp/x/checkpoint";
    CHECK(agent::worker_env(plan, {6, 1, 2}, ctx, {}).at("DTRAIN_CHECKPOINT_DIR") == "/tmp/x/checkpoint");
    CHECK(env.at("OMP_NUM_THREADS") == "2");
  }

  TEST_CASE("OMP_NUM_THREADS kept when set; batch variables only with a batch section") {
    config::Plan plan;
    plan.world_size = 4;
    plan.procs_per_instance = 4;
    agent::EnvContext ctx;
    ctx.cores = 2;
    auto env = agent::worker_env(plan, {0, 0, 0}, ctx, {{"OMP_NUM_THREADS", "7"}});
    CHECK(env.at("OMP_NUM_THREADS") == "7");
    CHECK(env.count("DTRAIN_GLOBAL_BATCH") == 0);
    CHECK(env.count("DTRAIN_STORE_ADDR") == 0);
    auto env2 = agent::worker_env(plan, {0, 0, 0}, ctx, {});
    CHECK(env2.at("OMP_NUM_THREADS") == "1");  // never below one
  }

  TEST_CASE("each rank gets its coordinates, the group sizes, the order and the schedule") {
    config::Plan plan;
    plan.world_size = 8;
    plan.instances = 2;
    plan.procs_per_instance = 4;
    plan.layout.pipeline = 2;
    plan.layout.tensor = 2;
    plan.layout.data = 2;
    plan.schedule = "gpipe";
    agent::EnvContext ctx;
    for (int rank = 0; rank < 8; ++rank) {
      CAPTURE(rank);
      auto env = agent::worker_env(plan, {rank, rank / 4, rank % 4}, ctx, {});
      CHECK(env.at("DTRAIN_TP_RANK") == std::to_string(rank % 2));
      CHECK(env.at("DTRAIN_DP_RANK") == std::to_string(rank / 2 % 2));
      CHECK(env.at("DTRAIN_PP_RANK") == std::to_string(rank / 4));
      CHECK(env.at("DTRAIN_TP_SIZE") == "2");
      CHECK(env.at("DTRAIN_DP_SIZE") == "2");
      CHECK(env.at("DTRAIN_PP_SIZE") == "2");
      CHECK(env.at("DTRAIN_PARALLEL_ORDER") == "tp-dp-pp");
      CHECK(env.at("DTRAIN_PP_SCHEDULE") == "gpipe");
      CHECK(env.at("DTRAIN_MICRO_BATCHES") == "1");  // no batch section: one micro-batch
    }
  }
}
