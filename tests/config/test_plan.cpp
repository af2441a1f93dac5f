#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include <nlohmann/json.hpp>

#include "dtrain/config/errors.hpp"
#include "dtrain/config/plan.hpp"
#include "config_test.hpp"

using namespace dtrain::config;
using namespace dtrain::config::test;
using nlohmann::json;

TEST_SUITE("config::plan") {
  TEST_CASE("the seed's examples: 5000 samples at global 500 are 10 iterations; 2 x 4 GPUs are 8") {
    Plan p = plan_of(R"({"command": ["a"], "cluster": {"procs_per_instance": 4},
                         "batch": {"global": 500, "dataset_size": 5000, "epochs": 3}})");
    REQUIRE(p.batch);
    CHECK(p.world_size == 4);
    CHECK(p.batch->global == 500);
    CHECK(p.batch->per_replica == 125);
    CHECK(p.batch->iterations_per_epoch == 10);
    CHECK(p.batch->total_iterations == 30);

    Plan q = plan_of(R"({"command": ["a"], "cluster": {"instances": 2, "gpus_per_instance": 4},
                         "rendezvous": {"endpoint": "10.0.0.1:29400"}})");
    CHECK(q.world_size == 8);
    CHECK(q.use_gpus);
    REQUIRE(q.ranks.size() == 8);
    for (int r = 0; r < 8; ++r) {
      CHECK(q.ranks[static_cast<std::size_t>(r)].rank == r);
      CHECK(q.ranks[static_cast<std::size_t>(r)].node_rank == r / 4);
      CHECK(q.ranks[static_cast<std::size_t>(r)].local_rank == r % 4);
    }
  }

  TEST_CASE("batch math from per_replica, micro-batches, ceil of the last iteration") {
    Plan p = plan_of(R"({"command": ["a"], "cluster": {"instances": 2, "gpus_per_instance": 8},
                         "rendezvous": {"endpoint": "h:1"},
                         "batch": {"per_replica": 32, "micro_batches": 4, "dataset_size": 5001, "epochs": 10}})");
    CHECK(p.batch->global == 512);
    CHECK(p.batch->micro_batch_size == 8);
    CHECK(p.batch->iterations_per_epoch == 10);  // ceil(5001 / 512)
    CHECK(p.batch->total_iterations == 100);
    Plan q = plan_of(R"({"command": ["a"], "cluster": {"procs_per_instance": 2}, "batch": {"per_replica": 1}})");
    CHECK(q.batch->global == 2);
    CHECK_FALSE(q.batch->iterations_per_epoch.has_value());
    CHECK_FALSE(plan_of(R"({"command": ["a"]})").batch.has_value());
  }

  TEST_CASE("impossible batch combinations name the path, the value and the world size") {
    CHECK(failure(R"({"command": ["a"], "cluster": {"instances": 2, "gpus_per_instance": 8}, "rendezvous": {"endpoint": "h:1"},
                      "batch": {"global": 500}})")
              .find("/batch/global: 500 does not divide by world size 16") != std::string::npos);
    CHECK(failure(R"({"command": ["a"], "cluster": {"procs_per_instance": 4}, "batch": {"global": 8, "per_replica": 4}})")
              .find("/batch/global: 8 is not world size 4 x per_replica 4 = 16") != std::string::npos);
    CHECK(failure(R"({"command": ["a"], "cluster": {"procs_per_instance": 4}, "batch": {"global": 24, "micro_batches": 4}})")
              .find("/batch/global: 24 gives per_replica 6 at world size 4, which does not divide by micro_batches 4") !=
          std::string::npos);
    CHECK(failure(R"({"command": ["a"], "cluster": {"instances": 3}})")
              .find("/rendezvous/endpoint: unset, but the job has 3 nodes") != std::string::npos);
  }

  TEST_CASE("a dataset smaller than one global batch is refused, not planned as one partial batch") {
    CHECK(failure(R"({"command": ["a"], "cluster": {"procs_per_instance": 3}, "batch": {"per_replica": 32, "dataset_size": 95}})")
              .find("/batch/dataset_size: 95 is smaller than the global batch 96 (world size 3 x per_replica 32)") !=
          std::string::npos);
    Plan p = plan_of(R"({"command": ["a"], "cluster": {"procs_per_instance": 3}, "batch": {"per_replica": 32, "dataset_size": 96}})");
    REQUIRE(p.batch);
    CHECK(p.batch->iterations_per_epoch == 1);
  }

  TEST_CASE("workers per node: spec, flags, SageMaker GPUs, visible GPUs, CPU cores") {
    CHECK(plan_of(R"({"command": ["a"]})").procs_per_instance == 3);
    CHECK(plan_of(R"({"command": ["a"]})").slots_source == "cpu cores");
    CHECK_FALSE(plan_of(R"({"command": ["a"]})").use_gpus);
    auto gpus = env_of();
    gpus.visible_gpus = 4;
    Plan g = plan_of(R"({"command": ["a"]})", {}, gpus);
    CHECK(g.procs_per_instance == 4);
    CHECK(g.use_gpus);
    CHECK(g.slots_source == "gpus");
    CHECK_FALSE(plan_of(R"({"command": ["a"], "cluster": {"procs_per_instance": 2}})", {}, gpus).use_gpus);
    Overrides o = flags({{"--nproc-per-node", "2"}});
    Plan f = plan_of(R"({"command": ["a"], "cluster": {"procs_per_instance": 5}})", o);
    CHECK(f.procs_per_instance == 2);
    CHECK(f.slots_source == "flags");
    auto sm = env_of({{"SM_HOSTS", R"(["algo-1"])"}, {"SM_CURRENT_HOST", "algo-1"}, {"SM_NUM_GPUS", "8"}});
    Plan s = plan_of(R"({"command": ["a"]})", {}, sm);
    CHECK(s.procs_per_instance == 8);
    CHECK(s.slots_source == "sagemaker");
    CHECK(failure(R"({"command": ["a"], "cluster": {"gpus_per_instance": 8, "bind_gpus": true}})", {}, gpus)
              .find("/cluster/bind_gpus: true needs one GPU per worker") != std::string::npos);
  }

  TEST_CASE("visible GPUs: /dev/nvidia[0-9]* honouring CUDA_VISIBLE_DEVICES") {
    auto dir = std::filesystem::temp_directory_path() / ("dtrain-dev-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    for (const char* n : {"nvidia0", "nvidia1", "nvidia2", "nvidiactl", "nvidia-uvm", "nvidia-caps"}) std::ofstream(dir / n);
    Environment e;
    e.dev_dir = dir.string();
    CHECK(count_visible_gpus(e) == 3);
    e.vars["CUDA_VISIBLE_DEVICES"] = "1";
    CHECK(count_visible_gpus(e) == 1);
    e.vars["CUDA_VISIBLE_DEVICES"] = "";
    CHECK(count_visible_gpus(e) == 0);
    e.vars["CUDA_VISIBLE_DEVICES"] = "0,7,1";  // CUDA stops at the first invalid entry
    CHECK(count_visible_gpus(e) == 1);
    e.vars["CUDA_VISIBLE_DEVICES"] = "GPU-8a1b,GPU-77c2";
    CHECK(count_visible_gpus(e) == 2);
    e.vars["DTRAIN_TEST_GPUS"] = "6";
    CHECK(count_visible_gpus(e) == 6);
    e.vars["DTRAIN_TEST_GPUS"] = "many";
    CHECK_THROWS_AS(count_visible_gpus(e), dtrain::ConfigError);
    std::filesystem::remove_all(dir);
    Environment none;
    none.dev_dir = "/nonexistent";
    CHECK(count_visible_gpus(none) == 0);
  }

  TEST_CASE("run id: spec > SLURM_JOB_ID > generated; several nodes derive the same one") {
    CHECK(plan_of(R"({"command": ["a"], "rendezvous": {"run_id": "mine"}})").run_id == "mine");
    auto slurm = env_of({{"SLURM_JOB_NODELIST", "n1"}, {"SLURM_NODEID", "0"}, {"SLURM_JOB_ID", "77"}});
    Plan s = plan_of(R"({"command": ["a"]})", {}, slurm);
    CHECK(s.run_id == "slurm-77");
    CHECK(s.run_id_source == "slurm");
    Plan g1 = plan_of(R"({"name": "job", "command": ["a"]})");
    Plan g2 = plan_of(R"({"name": "job", "command": ["a"]})");
    CHECK(std::regex_match(g1.run_id, std::regex("job-[0-9a-f]{12}")));
    CHECK(g1.run_id != g2.run_id);
    CHECK(g1.run_id_source == "generated");
    const char* multi = R"({"name": "job", "command": ["a"], "cluster": {"instances": 2}, "rendezvous": {"endpoint": "h:9"}})";
    Overrides n0, n1;
    n0.node_rank = 0;
    n1.node_rank = 1;
    CHECK(plan_of(multi, n0).run_id == plan_of(multi, n1).run_id);
    CHECK(plan_of(multi, n0).run_id_source == "derived");
  }

  TEST_CASE("rendezvous endpoint: spec or flags, else node 0 from the environment") {
    auto slurm = env_of({{"SLURM_JOB_NODELIST", "gpu[1-2]"}, {"SLURM_NODEID", "1"}});
    Plan s = plan_of(R"({"command": ["a"]})", {}, slurm);
    CHECK(s.rdzv_endpoint == "gpu1:29400");
    CHECK(s.rdzv_source == "slurm");
    auto torch = env_of({{"MASTER_ADDR", "fd00::1"}, {"MASTER_PORT", "23456"}, {"RANK", "0"}, {"WORLD_SIZE", "2"}});
    // MASTER_PORT is the workers' (rank 0's own store): the rendezvous keeps port 29400
    Plan t = plan_of(R"({"command": ["a"]})", {}, torch);
    CHECK(t.rdzv_endpoint == "[fd00::1]:29400");
    CHECK(t.identity.master_port == 23456);
    Overrides o = flags({{"--rdzv-endpoint", "10.9.9.9:1000"}});
    Plan f = plan_of(R"({"command": ["a"]})", o, slurm);
    CHECK(f.rdzv_endpoint == "10.9.9.9:1000");
    CHECK(f.rdzv_source == "flags");
    CHECK(plan_of(R"({"command": ["a"]})").rdzv_endpoint.empty());
    CHECK(plan_of(R"({"command": ["a"]})").rdzv_source == "standalone");
  }

  TEST_CASE("plan_to_json carries the contract keys") {
    Plan p = plan_of(R"({"name": "n", "command": ["a", "b"], "cluster": {"instances": 2, "gpus_per_instance": 4},
                         "rendezvous": {"endpoint": "10.0.0.1:29400"},
                         "batch": {"global": 512, "micro_batches": 2, "dataset_size": 5000}})",
                     [] {
                       Overrides o;
                       o.node_rank = 1;
                       return o;
                     }());
    json j = json::parse(plan_to_json(p));
    CHECK(j["world_size"] == 8);
    CHECK(j["instances"] == 2);
    CHECK(j["procs_per_instance"] == 4);
    CHECK(j["node_rank"] == 1);
    CHECK(j["master_addr"] == "10.0.0.1");
    CHECK(j["identity_source"] == "spec+flags");
    CHECK(j["batch"]["global"] == 512);
    CHECK(j["batch"]["per_replica"] == 64);
    CHECK(j["batch"]["micro_batches"] == 2);
    CHECK(j["batch"]["micro_batch_size"] == 32);
    CHECK(j["batch"]["iterations_per_epoch"] == 10);
    CHECK(j["batch"]["total_iterations"] == 10);
    CHECK(j["ranks"].size() == 8);
    CHECK(j["ranks"][5] == json{{"rank", 5}, {"node_rank", 1}, {"local_rank", 1}, {"dp_rank", 5}, {"pp_rank", 0}, {"tp_rank", 0}});
    CHECK(j["command"] == json{"a", "b"});
    CHECK(j["rendezvous"]["endpoint"] == "10.0.0.1:29400");
    CHECK(j["rendezvous"]["heartbeat_timeout_s"] == 15.0);
    CHECK(j["run_id"].get<std::string>().rfind("n-", 0) == 0);
  }

  TEST_CASE("the checkpoint folder: in both forms when the spec sets it, null and no row when not") {
    Plan set = plan_of(R"({"command": ["a"], "restart": {"max_restarts": 1, "checkpoint_dir": "ckpt/run1"}})");
    CHECK(json::parse(plan_to_json(set))["restart"]["checkpoint_dir"] == "ckpt/run1");
    CHECK(plan_to_text(set).find("checkpoints ckpt/run1 (DTRAIN_CHECKPOINT_DIR)\n") != std::string::npos);
    Plan unset = plan_of(R"({"command": ["a"]})");
    CHECK(json::parse(plan_to_json(unset))["restart"]["checkpoint_dir"].is_null());
    CHECK(plan_to_text(unset).find("checkpoints") == std::string::npos);
    CHECK(failure(R"({"command": ["a"], "restart": {"checkpoint_dir": 3}})").find("/restart/checkpoint_dir") != std::string::npos);
  }

  TEST_CASE("plan_to_text: summary and a rank table that stays short for big jobs") {
    Plan p = plan_of(R"({"name": "small", "command": ["python3", "train.py", "--lr", "0.1"], "cluster": {"procs_per_instance": 2},
                         "batch": {"per_replica": 10, "dataset_size": 100}})");
    std::string t = plan_to_text(p);
    CHECK(t.find("small") != std::string::npos);
    CHECK(t.find("python3 train.py --lr 0.1") != std::string::npos);
    CHECK(t.find("world size 2") != std::string::npos);
    CHECK(t.find("global 20 = 2 replicas x per-replica 10") != std::string::npos);
    CHECK(t.find("5 iterations per epoch") != std::string::npos);
    CHECK(t.find("     1     0      1  *") != std::string::npos);
    Plan big = plan_of(R"({"command": ["a"], "cluster": {"instances": 64, "gpus_per_instance": 8}, "rendezvous": {"endpoint": "h:1"}})");
    std::string bt = plan_to_text(big);
    CHECK(bt.find("(488 more ranks") != std::string::npos);
    CHECK(bt.find("   511    63      7") != std::string::npos);
    CHECK(std::count(bt.begin(), bt.end(), '\n') < 60);
  }

  TEST_CASE("model parallelism: replicas = data degree, global = data x per_replica") {
    // The done-when of the issue: 2 nodes x 4 workers, pipeline 2 x tensor 2 -> 2 replicas.
    Plan p = plan_of(R"({"command": ["a"], "cluster": {"instances": 2, "procs_per_instance": 4},
                         "parallel": {"pipeline": 2, "tensor": 2}, "rendezvous": {"endpoint": "h:1"},
                         "batch": {"per_replica": 16, "micro_batches": 4, "dataset_size": 1000}})");
    CHECK(p.world_size == 8);
    CHECK(p.layout.data == 2);
    REQUIRE(p.batch);
    CHECK(p.batch->global == 32);
    CHECK(p.batch->micro_batch_size == 4);
    CHECK(p.batch->iterations_per_epoch == 32);
    CHECK(p.warnings.empty());
    std::string t = plan_to_text(p);
    CHECK(t.find("pipeline 2 x tensor 2 x data 2 = 8 ranks in 2 replicas (order tp-dp-pp, schedule 1f1b)") != std::string::npos);
    CHECK(t.find("tensor groups, 4 x 2 ranks: [0 1] node 0 | [2 3] node 0 | [4 5] node 1 | [6 7] node 1") != std::string::npos);
    CHECK(t.find("pipeline groups, 4 x 2 ranks: [0 4] nodes 0,1 | [1 5] nodes 0,1") != std::string::npos);
    CHECK(t.find("data groups, 4 x 2 ranks: [0 2] node 0 | [1 3] node 0") != std::string::npos);
    CHECK(t.find("global 32 = 2 replicas x per-replica 16") != std::string::npos);
    CHECK(t.find("  rank  node  local    dp    pp    tp") != std::string::npos);
    CHECK(t.find("     5     1      1     0     1     1") != std::string::npos);
    json j = json::parse(plan_to_json(p));
    CHECK(j["parallel"]["data"] == 2);
    CHECK(j["parallel"]["groups"]["pipeline"] == json::parse("[[0,4],[1,5],[2,6],[3,7]]"));
    CHECK(j["ranks"][5]["pp_rank"] == 1);
    CHECK(j["ranks"][5]["tp_rank"] == 1);
    CHECK(j["ranks"][5]["dp_rank"] == 0);
    CHECK(j["batch"]["global"] == 32);

    Plan g = plan_of(R"({"command": ["a"], "cluster": {"procs_per_instance": 4}, "parallel": {"pipeline": 2},
                         "batch": {"global": 64}})");
    CHECK(g.batch->per_replica == 32);  // 64 over 2 replicas, not over 4 ranks
  }

  TEST_CASE("data-parallel plans are unchanged: no parallel rows, data = world size") {
    Plan p = plan_of(R"({"command": ["a"], "cluster": {"procs_per_instance": 3}, "batch": {"per_replica": 5}})");
    CHECK(p.layout.data == 3);
    CHECK(p.batch->global == 15);
    std::string t = plan_to_text(p);
    CHECK(t.find("parallel") == std::string::npos);
    CHECK(t.find("  rank  node  local\n") != std::string::npos);
  }

  TEST_CASE("a layout that does not fit the world is refused with the numbers") {
    std::string e = failure(R"({"command": ["a"], "cluster": {"procs_per_instance": 6}, "parallel": {"pipeline": 4}})");
    CHECK(e.find("/parallel: world size 6 (1 instance x 6 workers per instance) does not divide by pipeline 4 x "
                 "tensor 1 = 4") != std::string::npos);
    e = failure(R"({"command": ["a"], "cluster": {"procs_per_instance": 8}, "parallel": {"tensor": 2, "data": 3}})");
    CHECK(e.find("/parallel/data: 3 replicas x pipeline 1 x tensor 2 = 6 ranks, but the world size is 8") != std::string::npos);
    CHECK(e.find("leave data out to derive it (4)") != std::string::npos);
    e = failure(R"({"command": ["a"], "cluster": {"procs_per_instance": 8}, "parallel": {"tensor": 2},
                    "batch": {"global": 6}})");
    CHECK(e.find("/batch/global: 6 does not divide by 4 replicas (data degree: world size 8 / (pipeline 1 x tensor 2)); "
                 "nearest that do: 4 or 8") != std::string::npos);
    e = failure(R"({"command": ["a"], "cluster": {"procs_per_instance": 4}, "parallel": {"pipeline": 2},
                    "batch": {"global": 64, "per_replica": 16}})");
    CHECK(e.find("/batch/global: 64 is not 2 replicas (data degree: world size 4 / (pipeline 2 x tensor 1)) x "
                 "per_replica 16 = 32") != std::string::npos);
    // Pure data parallelism keeps the world-size wording.
    e = failure(R"({"command": ["a"], "cluster": {"procs_per_instance": 4}, "batch": {"global": 6}})");
    CHECK(e.find("6 does not divide by world size 4 (1 instance x 4 workers per instance)") != std::string::npos);
  }

  TEST_CASE("a tensor group across nodes is planned but warned about") {
    Plan p = plan_of(R"({"command": ["a"], "cluster": {"instances": 2, "procs_per_instance": 2},
                         "parallel": {"tensor": 4}, "rendezvous": {"endpoint": "h:1"}})");
    REQUIRE(p.warnings.size() == 1);
    CHECK(p.warnings[0].find("tensor group [0 1 2 3] spans nodes 0 and 1") != std::string::npos);
    Plan q = plan_of(R"({"command": ["a"], "cluster": {"instances": 2, "procs_per_instance": 2},
                         "parallel": {"tensor": 2, "order": "dp-tp-pp"}, "rendezvous": {"endpoint": "h:1"}})");
    REQUIRE(q.warnings.size() == 1);  // dp fastest puts the shards of a stage on different nodes
    CHECK(q.warnings[0].find("tensor group [0 2] spans nodes 0 and 1") != std::string::npos);
    CHECK(json::parse(plan_to_json(q))["warnings"].size() == 1);
  }

  TEST_CASE("elastic: cluster.instances {min, max}; every size from min to max must plan; replan recomputes the batch") {
    const std::string head = R"({"command": ["t"], "cluster": {"instances": {"min": 2, "max": 4}, "procs_per_instance": 2},
                                 "rendezvous": {"endpoint": "h:1"}, )";
    Plan p = plan_of(head + R"("batch": {"global": 48, "micro_batches": 2}})");
    CHECK(p.elastic());
    CHECK(p.instances == 4);
    CHECK(p.min_instances == 2);
    CHECK(p.world_size == 8);
    CHECK(p.batch->per_replica == 6);
    json j = json::parse(plan_to_json(p));
    CHECK(j["min_instances"] == 2);
    CHECK(j["rendezvous"]["last_call_s"] == 30);
    CHECK(plan_to_text(p).find("elastic: 2 to 4 instances (world size 4 to 8)") != std::string::npos);

    Plan q = replan(p, 3);  // a fixed global batch stays; per replica follows the replicas
    CHECK(q.world_size == 6);
    CHECK(q.ranks.size() == 6);
    CHECK(q.ranks.back().node_rank == 2);
    CHECK(q.batch->global == 48);
    CHECK(q.batch->per_replica == 8);
    CHECK(q.min_instances == 2);
    Plan r = replan(plan_of(head + R"("batch": {"per_replica": 5}})"), 2);  // a fixed per_replica stays
    CHECK(r.batch->per_replica == 5);
    CHECK(r.batch->global == 20);

    // 40 divides by 8 and 4 replicas but not by 6: the size it cannot run at is named
    CHECK(failure(head + R"("batch": {"global": 40}})").find(
              "at 3 nodes (elastic 2-4): 40 does not divide by world size 6") != std::string::npos);
    CHECK_THROWS_AS((void)replan(plan_of(head + R"("batch": {"global": 48}})"), 5), SpecError);  // 48 % 10
    // a fixed node count stays fixed
    CHECK_FALSE(plan_of(R"({"command": ["t"], "cluster": {"instances": 1}})").elastic());
  }

  TEST_CASE("elastic node counts that are not ranges are refused with the path") {
    auto bad = [](const std::string& v) {
      return failure(R"({"command": ["t"], "cluster": {"instances": )" + v + R"(}, "rendezvous": {"endpoint": "h:1"}})");
    };
    CHECK(bad(R"({"min": 3, "max": 2})").find("/cluster/instances: min 3 is more than max 2") != std::string::npos);
    CHECK(bad(R"({"max": 2})").find("/cluster/instances/min: missing") != std::string::npos);
    CHECK(bad(R"({"min": 1, "max": 2, "step": 1})").find("/cluster/instances/step: unknown key") != std::string::npos);
    CHECK(bad(R"({"min": 0, "max": 2})").find("/cluster/instances/min: 0 is out of range") != std::string::npos);
    CHECK(bad(R"({"min": "1", "max": 2})").find("/cluster/instances/min: \"1\" is a string; expected an integer") !=
          std::string::npos);
    CHECK(bad(R"("two")").find("/cluster/instances: \"two\" is a string; expected an integer from 1 to 65536, or") !=
          std::string::npos);
  }
}
