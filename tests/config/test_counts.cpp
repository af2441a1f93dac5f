// mpirun's counts in the plan (config/src/counts.cpp): -n/-np, -ppn and the hosts of -H, against
// --nnodes, --nproc-per-node, the spec and a scheduler's allocation.
#include <doctest/doctest.h>

#include <string>

#include "dtrain/config/errors.hpp"
#include "dtrain/config/plan.hpp"
#include "cli/run_binary.hpp"
#include "config_test.hpp"

using namespace dtrain::config;
using namespace dtrain::config::test;
using dtrain::test::TempDir;

namespace {

constexpr const char* kJob = R"({"command": ["a"]})";
constexpr const char* kMulti = R"({"command": ["a"], "rendezvous": {"endpoint": "h0:29400"}})";

}  // namespace

TEST_SUITE("config::counts") {
  TEST_CASE("-n 4 -ppn 2 plans 2 nodes x 2; -n alone is one node; -n over the nodes given") {
    Plan p = plan_of(kMulti, flags({{"-n", "4"}, {"-ppn", "2"}}));
    CHECK(p.instances == 2);
    CHECK(p.procs_per_instance == 2);
    CHECK(p.world_size == 4);
    CHECK(p.identity.field_sources.at("instances") == "flags");
    p = plan_of(kJob, flags({{"-np", "4"}}));
    CHECK(p.instances == 1);
    CHECK(p.procs_per_instance == 4);
    CHECK(p.slots_source == "-n 4 over 1 nodes");
    p = plan_of(kMulti, flags({{"-n", "6"}, {"--nnodes", "2"}}));
    CHECK(p.procs_per_instance == 3);
    // the spec's per-node count makes the node count
    p = plan_of(R"({"command": ["a"], "cluster": {"procs_per_instance": 2}, "rendezvous": {"endpoint": "h0:1"}})",
                flags({{"-n", "6"}}));
    CHECK(p.instances == 3);
    // a scheduler's nodes too
    auto slurm = env_of({{"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURM_NODEID", "1"}});
    p = plan_of(kJob, flags({{"-n", "8"}}), slurm);
    CHECK(p.instances == 2);
    CHECK(p.procs_per_instance == 4);
    CHECK(p.slots_source == "-n 8 over 2 nodes");
  }

  TEST_CASE("-n, -ppn, --nnodes, the spec and the allocation that disagree are refused") {
    CHECK(has(failure(kMulti, flags({{"-n", "5"}, {"-ppn", "2"}})),
              "-n: 5 does not divide by the 2 workers per node of --nproc-per-node 2"));
    CHECK(has(failure(kMulti, flags({{"-n", "4"}, {"-ppn", "2"}, {"--nnodes", "3"}})),
              "-n: 4 disagrees with --nnodes 3 x --nproc-per-node 2 = 6 workers"));
    CHECK(has(failure(kMulti, flags({{"-n", "4"}, {"--nnodes", "1:4"}})),
              "-n: 4 fixes the world size, but --nnodes makes the job elastic"));
    CHECK(has(failure(R"({"command": ["a"], "cluster": {"procs_per_instance": 3}})", flags({{"-n", "4"}})),
              "-n: 4 does not divide by the 3 workers per node of cluster.procs_per_instance 3 (job spec)"));
    CHECK(has(failure(kJob, flags({{"-n", "3"}}), env_of({{"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURM_NODEID", "0"}})),
              "-n: 3 does not divide by the 2 nodes of slurm"));
    CHECK(has(failure(kMulti, flags({{"-n", "4"}, {"-ppn", "2"}}),
                      env_of({{"SLURM_JOB_NODELIST", "n[1-3]"}, {"SLURM_NODEID", "0"}})),
              "-n 4 with --nproc-per-node 2 (2 nodes, flags) disagrees with SLURM_JOB_NODELIST=n[1-3]"));
    CHECK(has(failure(kJob, flags({{"-n", "4"}, {"--nproc-per-node", "cpu"}})), "-n: 4 disagrees with 1 instance x 3"));
  }

  TEST_CASE("-H: the hosts are the nodes, node 0 the first and the rendezvous; slots are the workers per node") {
    Plan p = plan_of(kJob, flags({{"-H", "a:2,b:2"}}));
    CHECK(p.instances == 2);
    CHECK(p.procs_per_instance == 2);
    CHECK(p.slots_source == "-H a:2,b:2");
    CHECK(p.identity.master_addr == "a");
    CHECK(p.rdzv_endpoint == "a:29400");
    REQUIRE(p.hosts);
    CHECK(p.hosts->names == std::vector<std::string>{"a", "b"});
    CHECK(p.hosts->this_host == -1);  // testhost is not one of them
    CHECK(p.identity.hosts == std::vector<std::string>{"a", "b"});
    // this machine's place among them is its node rank (its short name counts)
    p = plan_of(kJob, flags({{"--hosts", "a,b.lab,c"}, {"--nproc-per-node", "3"}}), env_of({}, "b"));
    CHECK(p.identity.node_rank == 1);
    CHECK(p.hosts->this_host == 1);
    CHECK(p.procs_per_instance == 3);
    CHECK(p.identity.field_sources.at("node_rank") == "hosts");
    // -n over the hosts
    CHECK(plan_of(kJob, flags({{"-H", "a,b"}, {"-n", "6"}})).procs_per_instance == 3);
    // --node-rank names this machine's place
    CHECK(plan_of(kJob, flags({{"-H", "a,b"}, {"--node-rank", "1"}})).hosts->this_host == 1);
  }

  TEST_CASE("--hostfile and --launch-agent in the plan; the hostfile with -H, or the agent alone, refused") {
    TempDir t;
    std::string file = t.write("hosts", "# boxes\nn1 slots=4\nn2 slots=4\n");
    Plan p = plan_of(kJob, flags({{"--hostfile", file.c_str()}, {"--launch-agent", "ssh -F 'my cfg'"}}));
    REQUIRE(p.hosts);
    CHECK(p.hosts->names == std::vector<std::string>{"n1", "n2"});
    CHECK(p.hosts->from == "--hostfile " + file);
    CHECK(p.hosts->launch_agent == std::vector<std::string>{"ssh", "-F", "my cfg"});
    CHECK(p.procs_per_instance == 4);
    CHECK(plan_of(kJob, flags({{"-H", "a,b"}})).hosts->launch_agent == std::vector<std::string>{"ssh"});
    CHECK(has(failure(kJob, flags({{"--launch-agent", "ssh"}})), "--launch-agent: names the command that reaches"));
    std::string uneven = t.write("uneven", "n1 slots=4\nn2 slots=2\n");
    CHECK(has(failure(kJob, flags({{"--hostfile", uneven.c_str()}})),
              "n1:4 and n2:2 have different slot counts, but dtrain runs the same number of workers on every node"));
    CHECK_THROWS_WITH_AS(flags({{"--hostfile", "/nonexistent/hosts"}}),
                         doctest::Contains("--hostfile: /nonexistent/hosts: cannot read the hostfile"), SpecError);
  }

  TEST_CASE("cluster.cpu_bind: none, core or numa, from the spec or --cpu-bind / --bind-to, the flag first") {
    Plan p = plan_of(kJob);
    CHECK(p.spec.cluster.cpu_bind == "none");
    CHECK(p.warnings.empty());
    p = plan_of(R"({"command": ["a"], "cluster": {"cpu_bind": "numa"}})", flags({{"--cpu-bind", "core"}}));
    CHECK(p.spec.cluster.cpu_bind == "core");
    CHECK(p.warnings.empty());
    CHECK(plan_of(kJob, flags({{"--bind-to", "numa"}})).spec.cluster.cpu_bind == "numa");
    CHECK(has(failure(R"({"command": ["a"], "cluster": {"cpu_bind": "socket"}})"),
              "/cluster/cpu_bind: \"socket\" is not a CPU binding; expected \"none\""));
    CHECK(has(failure(kJob, flags({{"--bind-to", "hwthread"}})), "--bind-to: \"hwthread\" is not a CPU binding"));
  }

  TEST_CASE("-H that contradicts the flags, the spec or itself is refused") {
    CHECK(has(failure(kJob, flags({{"-H", "a:4,b:2"}})),
              "-H a:4,b:2: a:4 and b:2 have different slot counts, but dtrain runs the same number of workers on every node"));
    CHECK(has(failure(kJob, flags({{"-H", "a:4,b"}, {"--nproc-per-node", "2"}})),
              "-H a:4,b: gives 4 workers per host, but --nproc-per-node 2 says 2"));
    CHECK(has(failure(R"({"command": ["a"], "cluster": {"procs_per_instance": 2}})", flags({{"-H", "a:4,b:4"}})),
              "but cluster.procs_per_instance 2 (job spec) says 2"));
    CHECK(has(failure(kJob, flags({{"-H", "a,b"}, {"--nnodes", "3"}})),
              "--nnodes 3 (flags) disagrees with -H a,b (2 nodes)"));
    CHECK(has(failure(R"({"command": ["a"], "cluster": {"instances": 3}})", flags({{"-H", "a,b"}})),
              "/cluster/instances 3 (job spec) disagrees with -H a,b (2 nodes)"));
    CHECK(has(failure(kJob, flags({{"-H", "a,b"}, {"--node-rank", "0"}}), env_of({}, "b")),
              "--node-rank 0 (flags) disagrees with host b = node 1 of -H a,b"));
    CHECK(has(failure(kJob, flags({{"-H", "a:4,b:4"}, {"-n", "6"}})), "-n: 6 disagrees with the 8 slots of -H a:4,b:4"));
    CHECK_THROWS_WITH_AS(flags({{"-H", "a,b,a"}}), doctest::Contains("-H: host 'a' is named twice"), SpecError);
  }
}
