// Node identity on Kubernetes (config/src/identity_kubernetes.cpp): the env that Kubeflow's
// PyTorchJob sets in each pod, before and since training-operator 1.8, and indexed Jobs.
#include <doctest/doctest.h>

#include <string>

#include "dtrain/config/errors.hpp"
#include "dtrain/config/plan.hpp"
#include "config_test.hpp"

using namespace dtrain::config;
using namespace dtrain::config::test;

namespace {

// Host names here carry their domain (setHostnameAsFQDN) or end in none that resolves, so no test
// asks a name server.
const char* kThree = R"({"command": ["a"], "cluster": {"instances": 3}})";

}  // namespace

TEST_SUITE("config::identity kubernetes") {
  TEST_CASE("PyTorchJob before training-operator 1.8: WORLD_SIZE counts the pods, RANK is the pod's") {
    auto env = env_of({{"MASTER_ADDR", "train-master-0"}, {"MASTER_PORT", "23456"}, {"WORLD_SIZE", "3"},
                       {"RANK", "2"}, {"PYTHONUNBUFFERED", "0"}}, "train-worker-1");
    auto id = discover_identity(spec_of(), {}, env);
    CHECK(id.instances == 3);
    CHECK(id.node_rank == 2);
    CHECK(id.master_addr == "train-master-0");
    CHECK(id.master_port == 23456);
    CHECK(id.source == "torch-env");
    Plan plan = make_plan(spec_of(R"({"command": ["a"], "rendezvous": {"token_file": "/t"}})"), {}, env);
    CHECK(plan.rdzv_endpoint == "train-master-0:29400");
    CHECK(plan.rdzv_source == "torch-env");
  }

  TEST_CASE("PyTorchJob since 1.8: WORLD_SIZE is replicas x nprocPerNode, PET_NNODES the node count") {
    auto env = env_of({{"MASTER_ADDR", "train-master-0"}, {"PET_MASTER_ADDR", "train-master-0"},
                       {"MASTER_PORT", "23456"}, {"PET_MASTER_PORT", "23456"}, {"WORLD_SIZE", "6"}, {"RANK", "1"},
                       {"PET_NODE_RANK", "1"}, {"PET_NNODES", "3"}, {"PET_NPROC_PER_NODE", "2"}});
    auto id = discover_identity(spec_of(), {}, env);
    CHECK(id.instances == 3);
    CHECK(id.field_sources.at("instances") == "torch-env");
    CHECK(id.node_rank == 1);
    // RANK 4 of 3 nodes is refused naming PET_NNODES, not WORLD_SIZE.
    env.vars["RANK"] = "4";
    CHECK(has(failure(spec_of(), {}, env), "RANK=4 (torch-env) but PET_NNODES=3 (torch-env)"));
    // An elastic range: its max, until the PET_* flags (--nnodes MIN:MAX) say more.
    env.vars["RANK"] = "1";
    env.vars["PET_NNODES"] = "1:4";
    id = discover_identity(spec_of(), {}, env);
    CHECK(id.instances == 4);
    // The flags win over the env, as everywhere.
    Overrides o = flags({{"--nnodes", "2"}});
    CHECK(discover_identity(spec_of(R"({"command": ["a"]})", o), o, env).instances == 2);
  }

  TEST_CASE("indexed Job: JOB_COMPLETION_INDEX is the node rank, index 0's host name the master") {
    auto env = env_of({{"JOB_COMPLETION_INDEX", "2"}}, "train-2.train-svc.default.svc.cluster.local");
    auto id = discover_identity(spec_of(kThree), {}, env);
    CHECK(id.node_rank == 2);
    CHECK(id.field_sources.at("node_rank") == "kubernetes");
    CHECK(id.instances == 3);
    CHECK(id.master_addr == "train-0.train-svc.default.svc.cluster.local");
    CHECK(id.field_sources.at("master_addr") == "kubernetes");
    CHECK(id.source == "spec+kubernetes");
    Plan plan = make_plan(spec_of(R"({"command": ["a"], "cluster": {"instances": 3}, "rendezvous": {"token_file": "/t"}})"),
                          {}, env);
    CHECK(plan.rdzv_endpoint == "train-0.train-svc.default.svc.cluster.local:29400");
    // A JobSet's pod: <jobset>-<replicated job>-<job index>-<pod index>.
    env = env_of({{"JOB_COMPLETION_INDEX", "1"}, {"JOB_INDEX", "0"}}, "js-workers-0-1.js.ns.svc.cluster.local");
    CHECK(discover_identity(spec_of(kThree), {}, env).master_addr == "js-workers-0-0.js.ns.svc.cluster.local");
  }

  TEST_CASE("Kubeflow TrainJob (a JobSet): PET_NNODES with JOB_COMPLETION_INDEX, no MASTER_ADDR or RANK") {
    auto env = env_of({{"JOB_COMPLETION_INDEX", "1"}, {"JOB_INDEX", "0"}, {"PET_NNODES", "2"}, {"PET_NODE_RANK", "1"},
                       {"PET_NPROC_PER_NODE", "4"}, {"PET_MASTER_ADDR", "tj-node-0-0.tj"}, {"PET_MASTER_PORT", "29500"}},
                      "tj-node-0-1.tj.default.svc.cluster.local");
    auto id = discover_identity(spec_of(), {}, env);
    CHECK(id.instances == 2);
    CHECK(id.node_rank == 1);
    CHECK(id.master_addr == "tj-node-0-0.tj.default.svc.cluster.local");
    CHECK(id.source == "kubernetes");
  }

  TEST_CASE("indexed Job: MASTER_ADDR and WORLD_SIZE of the manifest, and RANK agreeing") {
    auto env = env_of({{"JOB_COMPLETION_INDEX", "1"}, {"MASTER_ADDR", "train-0.svc"}, {"WORLD_SIZE", "2"}}, "elsewhere");
    auto id = discover_identity(spec_of(), {}, env);
    CHECK(id.master_addr == "train-0.svc");
    CHECK(id.instances == 2);
    CHECK(id.node_rank == 1);
    env.vars["RANK"] = "1";
    CHECK(discover_identity(spec_of(), {}, env).node_rank == 1);
    env.vars["RANK"] = "0";
    CHECK(has(failure(spec_of(), {}, env), "JOB_COMPLETION_INDEX: 1 (kubernetes) disagrees with RANK=0 (torch-env)"));
    // WORLD_SIZE alone (no MASTER_ADDR, no RANK) is the node count too, with index 0's host name.
    env = env_of({{"JOB_COMPLETION_INDEX", "2"}, {"WORLD_SIZE", "3"}}, "t-2.s.n");
    id = discover_identity(spec_of(), {}, env);
    CHECK(id.instances == 3);
    CHECK(id.master_addr == "t-0.s.n");
    env.vars["WORLD_SIZE"] = "three";
    auto msg = failure(spec_of(), {}, env);
    CHECK(has(msg, "WORLD_SIZE: \"three\""));
    CHECK(has(msg, "nothing gives the node count"));
  }

  TEST_CASE("indexed Job: what cannot be known is refused with what to set") {
    // No node count: node 0 would run alone, the others fail.
    for (const char* index : {"0", "2"}) {
      auto msg = failure(spec_of(), {}, env_of({{"JOB_COMPLETION_INDEX", index}}, "train-" + std::string(index) + ".s.n"));
      CHECK(has(msg, "nothing gives the node count"));
      CHECK(has(msg, "set cluster.instances in the job spec"));
      CHECK_FALSE(has(msg, "is not below the node count"));
    }
    // A host name that is not $(job-name)-$(index).
    auto msg = failure(spec_of(kThree), {}, env_of({{"JOB_COMPLETION_INDEX", "1"}}, "trainer.s.n"));
    CHECK(has(msg, "this host's name \"trainer.s.n\" does not end in \"-1\""));
    CHECK(has(msg, "set MASTER_ADDR"));
    CHECK(has(failure(spec_of(kThree), {}, env_of({{"JOB_COMPLETION_INDEX", "x"}}, "t-1.s")),
              "JOB_COMPLETION_INDEX: \"x\""));
    // A second job of a JobSet's replicated job has no place in one node list.
    CHECK(has(failure(spec_of(kThree), {}, env_of({{"JOB_COMPLETION_INDEX", "0"}, {"JOB_INDEX", "1"}}, "js-w-1-0.js")),
              "JOB_INDEX: 1 (JobSet)"));
    // The count or --standalone mends it.
    Overrides o = flags({{"--nnodes", "3"}});
    CHECK(discover_identity(spec_of(R"({"command": ["a"]})", o), o, env_of({{"JOB_COMPLETION_INDEX", "2"}}, "t-2.s"))
              .node_rank == 2);
    Overrides alone;
    alone.standalone = true;
    CHECK(discover_identity(spec_of(), alone, env_of({{"JOB_COMPLETION_INDEX", "2"}}, "t-2.s")).instances == 1);
  }

  TEST_CASE("a worker inherits the pod's env: not a node identity") {
    auto env = env_of({{"JOB_COMPLETION_INDEX", "2"}, {"LOCAL_RANK", "0"}, {"RANK", "5"}, {"WORLD_SIZE", "6"}}, "t-2.s");
    auto id = discover_identity(spec_of(), {}, env);
    CHECK(id.source == "default");
    CHECK(id.node_rank == 0);
  }
}
