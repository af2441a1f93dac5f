#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "dtrain/config/errors.hpp"
#include "dtrain/config/plan.hpp"
#include "config_test.hpp"

using namespace dtrain::config;
using namespace dtrain::config::test;

TEST_SUITE("config::identity") {
  TEST_CASE("no environment: a single node, everything from defaults") {
    auto id = discover_identity(spec_of(), {}, env_of({}));
    CHECK(id.instances == 1);
    CHECK(id.node_rank == 0);
    CHECK(id.master_addr == "127.0.0.1");
    CHECK(id.source == "default");
    CHECK(id.host == "testhost");
    CHECK(id.field_sources.at("instances") == "default");
  }

  TEST_CASE("SageMaker from SM_RESOURCE_CONFIG: hosts sorted, rank = index of current host") {
    auto id = discover_identity(
        spec_of(), {},
        env_of({{"SM_RESOURCE_CONFIG", R"({"current_host":"algo-2","hosts":["algo-3","algo-1","algo-2"]})"},
                {"SM_NUM_GPUS", "8"}}));
    CHECK(id.source == "sagemaker");
    CHECK(id.instances == 3);
    CHECK(id.node_rank == 1);
    CHECK(id.master_addr == "algo-1");
    CHECK(id.host == "algo-2");
    CHECK(id.hosts == std::vector<std::string>{"algo-1", "algo-2", "algo-3"});
    CHECK(id.gpus_per_instance == 8);
    CHECK(id.field_sources.at("gpus_per_instance") == "sagemaker");
  }

  TEST_CASE("SageMaker from the resource config file") {
    auto dir = std::filesystem::temp_directory_path() / ("dtrain-sm-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "resourceconfig.json")
        << R"({"current_host": "algo-1", "hosts": ["algo-1", "algo-2"], "network_interface_name": "eth0"})";
    Environment env = env_of({});
    env.sagemaker_resource_file = (dir / "resourceconfig.json").string();
    auto id = discover_identity(spec_of(), {}, env);
    std::filesystem::remove_all(dir);
    CHECK(id.source == "sagemaker");
    CHECK(id.instances == 2);
    CHECK(id.node_rank == 0);
    CHECK(id.master_addr == "algo-1");
  }

  TEST_CASE("SageMaker from SM_HOSTS and SM_CURRENT_HOST") {
    auto id = discover_identity(spec_of(), {},
                                env_of({{"SM_HOSTS", R"(["algo-1","algo-2"])"}, {"SM_CURRENT_HOST", "algo-2"}}));
    CHECK(id.instances == 2);
    CHECK(id.node_rank == 1);
    CHECK(failure(spec_of(), {}, env_of({{"SM_HOSTS", R"(["algo-1"])"}, {"SM_CURRENT_HOST", "algo-9"}}))
              .find("host \"algo-9\" (sagemaker) is not in SM_HOSTS") != std::string::npos);
    CHECK(failure(spec_of(), {}, env_of({{"SM_HOSTS", "algo-1,algo-2"}, {"SM_CURRENT_HOST", "algo-1"}}))
              .find("is not a JSON list") != std::string::npos);
    CHECK(failure(spec_of(), {}, env_of({{"SM_HOSTS", R"(["a"])"}})).find("SM_CURRENT_HOST: is not set") !=
          std::string::npos);
  }

  TEST_CASE("SageMaker hosts that name one host twice are refused, not planned as fewer nodes") {
    // ["a","a"] once planned 1 node: each instance of SageMaker is one node, so a duplicate is a broken
    // resource configuration
    for (const auto& env : {env_of({{"SM_HOSTS", R"(["algo-1","algo-1"])"}, {"SM_CURRENT_HOST", "algo-1"}}),
                            env_of({{"SM_RESOURCE_CONFIG", R"({"current_host": "b", "hosts": ["b", "a", "b"]})"}})}) {
      std::string e = failure(spec_of(), {}, env);
      CHECK(e.find("twice (sagemaker)") != std::string::npos);
      CHECK(e.find("each instance is one node") != std::string::npos);
    }
    CHECK(failure(spec_of(), {}, env_of({{"SM_HOSTS", R"(["algo-1","algo-1"])"}, {"SM_CURRENT_HOST", "algo-1"}}))
              .find("SM_HOSTS: names host \"algo-1\" twice") != std::string::npos);
  }

  TEST_CASE("Slurm: hostlist, node id, job id") {
    auto id = discover_identity(spec_of(), {},
                                env_of({{"SLURM_JOB_NODELIST", "gpu[01-03,07],login2,x[9-11]"},
                                        {"SLURM_NODEID", "4"},
                                        {"SLURM_NNODES", "8"},
                                        {"SLURM_JOB_ID", "12345"}}));
    CHECK(id.source == "slurm");
    CHECK(id.instances == 8);
    CHECK(id.node_rank == 4);
    CHECK(id.host == "login2");
    CHECK(id.master_addr == "gpu01");
    CHECK(id.run_id == "slurm-12345");
    CHECK(id.hosts.size() == 8);
  }

  TEST_CASE("Slurm inconsistencies are errors naming the variables") {
    CHECK(failure(spec_of(), {}, env_of({{"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURM_NODEID", "0"}, {"SLURM_NNODES", "3"}}))
              .find("SLURM_NNODES: 3 (slurm) disagrees with the 2 hosts of SLURM_JOB_NODELIST") != std::string::npos);
    CHECK(failure(spec_of(), {}, env_of({{"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURMD_NODENAME", "n7"}}))
              .find("host \"n7\" (slurm) is not in SLURM_JOB_NODELIST=n[1-2]") != std::string::npos);
    CHECK(failure(spec_of(), {},
                  env_of({{"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURMD_NODENAME", "n2"}, {"SLURM_NODEID", "0"}}))
              .find("disagrees with SLURMD_NODENAME=n2") != std::string::npos);
    CHECK(failure(spec_of(), {}, env_of({{"SLURM_JOB_NODELIST", "n[1-2"}})).find("SLURM_JOB_NODELIST: hostlist") !=
          std::string::npos);
    CHECK(failure(spec_of(), {}, env_of({{"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURM_NODEID", "x"}}))
              .find("SLURM_NODEID: \"x\" (slurm) is not an integer") != std::string::npos);
  }

  TEST_CASE("Slurm node rank from SLURMD_NODENAME or the host name when SLURM_NODEID is missing") {
    auto id = discover_identity(spec_of(), {}, env_of({{"SLURM_JOB_NODELIST", "n[1-3]"}, {"SLURMD_NODENAME", "n3"}}));
    CHECK(id.node_rank == 2);
    Environment env = env_of({{"SLURM_JOB_NODELIST", "testhost,other"}});
    CHECK(discover_identity(spec_of(), {}, env).node_rank == 0);
    CHECK(failure(spec_of(), {}, env_of({{"SLURM_JOB_NODELIST", "a,b"}})).find("SLURM_NODEID: is not set") !=
          std::string::npos);
  }

  TEST_CASE("torch/Kubernetes env: MASTER_ADDR, MASTER_PORT, node RANK, WORLD_SIZE in nodes") {
    auto id = discover_identity(spec_of(), {},
                                env_of({{"MASTER_ADDR", "10.1.1.1"}, {"MASTER_PORT", "23456"}, {"RANK", "1"}, {"WORLD_SIZE", "3"}}));
    CHECK(id.source == "torch-env");
    CHECK(id.instances == 3);
    CHECK(id.node_rank == 1);
    CHECK(id.master_addr == "10.1.1.1");
    CHECK(id.master_port == 23456);
    CHECK(failure(spec_of(), {}, env_of({{"MASTER_ADDR", "m"}, {"RANK", "2"}, {"WORLD_SIZE", "2"}}))
              .find("node rank 2 is not below the node count: RANK=2 (torch-env) but WORLD_SIZE=2 (torch-env)") !=
          std::string::npos);
    CHECK(failure(spec_of(), {}, env_of({{"MASTER_ADDR", "m"}, {"MASTER_PORT", "70000"}})).find("MASTER_PORT") !=
          std::string::npos);
  }

  TEST_CASE("a worker's own env (LOCAL_RANK or DTRAIN_RUN_ID) is not a node identity") {
    auto worker = env_of({{"MASTER_ADDR", "10.1.1.1"}, {"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}});
    auto id = discover_identity(spec_of(), {}, worker);
    CHECK(id.source == "default");
    CHECK(id.instances == 1);
    CHECK(id.node_rank == 0);
    worker.vars.erase("LOCAL_RANK");
    worker.vars["DTRAIN_RUN_ID"] = "r1";
    CHECK(discover_identity(spec_of(), {}, worker).source == "default");
    // RANK alone (no MASTER_ADDR, no WORLD_SIZE) is not taken either.
    CHECK(discover_identity(spec_of(), {}, env_of({{"RANK", "3"}})).source == "default");
  }

  TEST_CASE("precedence: flags > spec > environment > defaults, field by field") {
    auto torch = env_of({{"MASTER_ADDR", "m0"}, {"RANK", "1"}, {"WORLD_SIZE", "2"}});
    auto id = discover_identity(spec_of(R"({"command": ["a"], "cluster": {"instances": 4}})"), {}, torch);
    CHECK(id.instances == 4);
    CHECK(id.field_sources.at("instances") == "spec");
    CHECK(id.node_rank == 1);
    CHECK(id.field_sources.at("node_rank") == "torch-env");
    CHECK(id.source == "spec+torch-env");
    Overrides o = flags({{"--nnodes", "3"}, {"--node-rank", "2"}});
    id = discover_identity(spec_of(R"({"command": ["a"], "cluster": {"instances": 4}})", o), o, torch);
    CHECK(id.instances == 3);
    CHECK(id.node_rank == 2);
    CHECK(id.source == "flags");
    CHECK(id.master_addr == "m0");
    CHECK(id.field_sources.at("master_addr") == "torch-env");
    // Spec endpoint gives the master when the environment does not.
    id = discover_identity(spec_of(R"({"command": ["a"], "rendezvous": {"endpoint": "10.0.0.9:29400"}})"), {}, env_of({}));
    CHECK(id.master_addr == "10.0.0.9");
    CHECK(id.field_sources.at("master_addr") == "spec");
  }

  TEST_CASE("SageMaker is preferred over Slurm over torch env when several are present") {
    auto env = env_of({{"SM_HOSTS", R"(["algo-1"])"}, {"SM_CURRENT_HOST", "algo-1"}, {"SLURM_JOB_NODELIST", "n[1-2]"},
                       {"SLURM_NODEID", "1"}, {"MASTER_ADDR", "m"}});
    CHECK(discover_identity(spec_of(), {}, env).source == "sagemaker");
    env.vars.erase("SM_HOSTS");
    env.vars.erase("SM_CURRENT_HOST");
    CHECK(discover_identity(spec_of(), {}, env).source == "slurm");
  }

  TEST_CASE("the scheduler's allocation may be restated by flags or spec, not contradicted") {
    auto slurm = env_of({{"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURM_NODEID", "1"}, {"SLURM_NNODES", "2"}});
    Overrides same = flags({{"--nnodes", "2"}, {"--node-rank", "1"}});
    CHECK(discover_identity(spec_of(R"({"command": ["a"]})", same), same, slurm).instances == 2);
    Overrides more = flags({{"--nnodes", "4"}});
    // the host list is named as the variable holds it, with the count it gives
    CHECK(failure(spec_of(R"({"command": ["a"]})", more), more, slurm)
              .find("--nnodes: --nnodes 4 (flags) disagrees with SLURM_JOB_NODELIST=n[1-2] (2 hosts, slurm)") !=
          std::string::npos);
    Overrides rank;
    rank.node_rank = 0;
    CHECK(failure(spec_of(), rank, slurm).find("--node-rank 0 (flags) disagrees with SLURM_NODEID=1 (slurm)") !=
          std::string::npos);
    CHECK(failure(spec_of(R"({"command": ["a"], "cluster": {"instances": 1}})"), {}, slurm)
              .find("/cluster/instances 1 (job spec) disagrees with SLURM_JOB_NODELIST=n[1-2] (2 hosts, slurm)") !=
          std::string::npos);
  }

  TEST_CASE("a host missing from SM_HOSTS says that, and nothing claims SM_CURRENT_HOST is unset") {
    std::string w = failure(spec_of(), {}, env_of({{"SM_HOSTS", R"(["algo-1","algo-2"])"}, {"SM_CURRENT_HOST", "algo-3"}}));
    CHECK(w.find("SM_CURRENT_HOST: host \"algo-3\" (sagemaker) is not in SM_HOSTS [algo-1, algo-2]") != std::string::npos);
    CHECK(w.find("is not set") == std::string::npos);
    CHECK(w.find("srun") == std::string::npos);
    // a Slurm host name that is not in the list: that, not "SLURM_NODEID is not set"
    w = failure(spec_of(), {}, env_of({{"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURMD_NODENAME", "n7"}}));
    CHECK(w.find("SLURMD_NODENAME: host \"n7\" (slurm) is not in SLURM_JOB_NODELIST=n[1-2]") != std::string::npos);
    CHECK(w.find("is not set") == std::string::npos);
    // neither: this host's name is named
    w = failure(spec_of(), {}, env_of({{"SLURM_JOB_NODELIST", "a,b"}}));
    CHECK(w.find("SLURM_NODEID: is not set, and neither SLURMD_NODENAME nor this host's name \"testhost\" is in "
                 "the node list") != std::string::npos);
  }

  TEST_CASE("a partial Slurm environment is refused, not ignored") {
    std::string w = failure(spec_of(), {}, env_of({{"SLURM_NODEID", "1"}, {"SLURM_JOB_ID", "7"}}));
    CHECK(w.find("SLURM_NODEID: SLURM_NODEID=1 is set but SLURM_JOB_NODELIST is not (slurm): a partial Slurm "
                 "environment") != std::string::npos);
    w = failure(spec_of(), {}, env_of({{"SLURM_NNODES", "4"}}));
    CHECK(w.find("SLURM_NNODES=4 is set but SLURM_JOB_NODELIST is not") != std::string::npos);
    CHECK(discover_identity(spec_of(), {}, env_of({{"SLURM_JOB_ID", "7"}})).source == "default");  // not an identity
  }

  TEST_CASE("SLURM_NTASKS_PER_NODE > 1: a warning for the first task of a node, a refusal for the others") {
    auto env = env_of({{"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURM_NODEID", "0"}, {"SLURM_NTASKS_PER_NODE", "4"}});
    auto id = discover_identity(spec_of(), {}, env);
    REQUIRE(id.warnings.size() == 1);
    CHECK(id.warnings[0].find("SLURM_NTASKS_PER_NODE=4 (slurm): dtrain runs once per node") != std::string::npos);
    CHECK(id.warnings[0].find("--nproc-per-node 4") != std::string::npos);
    env.vars["SLURM_LOCALID"] = "2";
    std::string w = failure(spec_of(), {}, env);
    CHECK(w.find("SLURM_LOCALID: 2 (slurm): this is task 2 of SLURM_NTASKS_PER_NODE=4 on this node") != std::string::npos);
    env.vars["SLURM_NTASKS_PER_NODE"] = "1";
    CHECK(discover_identity(spec_of(), {}, env).warnings.empty());
  }

  TEST_CASE("MASTER_PORT: --master-port, else exported (whatever the identity source), not inside a worker") {
    auto id = discover_identity(spec_of(), {}, env_of({{"MASTER_PORT", "29555"}}));
    CHECK(id.master_port == 29555);
    CHECK(id.field_sources.at("master_port") == "env");
    Overrides o = flags({{"--master-port", "29600"}, {"--master-addr", "10.0.0.5"}});
    id = discover_identity(spec_of(), o, env_of({{"MASTER_PORT", "29555"}, {"MASTER_ADDR", "m"}}));
    CHECK(id.master_port == 29600);
    CHECK(id.master_addr == "10.0.0.5");
    CHECK(id.field_sources.at("master_addr") == "flags");
    id = discover_identity(spec_of(), {}, env_of({{"MASTER_PORT", "29555"}, {"LOCAL_RANK", "0"}}));
    CHECK_FALSE(id.master_port.has_value());
  }

  TEST_CASE("--standalone: one node, the environment's nodes ignored") {
    Overrides o = flags({{"--standalone", ""}});
    auto id = discover_identity(spec_of(), o, env_of({{"SLURM_JOB_NODELIST", "n[1-3]"}, {"SLURM_NODEID", "2"}}));
    CHECK(id.instances == 1);
    CHECK(id.node_rank == 0);
    CHECK(id.source == "default");
  }
}
