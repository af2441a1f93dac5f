// `dtrain plan` through the real binary, as a user runs it.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_binary.hpp"

using dtrain::test::base_env;
using dtrain::test::run;
using dtrain::test::TempDir;
using nlohmann::json;

namespace {

struct BadSpec {
  const char* name;
  const char* spec;                // job file text
  std::vector<std::string> args;   // extra arguments after the file
  const char* fragment;            // must appear in stderr
};

// Every case must exit 2 and name the problem.
const BadSpec kBadSpecs[] = {
    {"not JSON", R"({"command": ["a"],})", {}, "invalid JSON at line 1, column 19"},
    {"truncated JSON", R"({"command": ["a")", {}, "invalid JSON at line 1"},
    {"empty file", "", {}, "the job spec is empty; expected a JSON object"},
    {"blank file", "  \n", {}, "the job spec is empty"},
    {"top level is an array", R"(["a"])", {}, "/: the job spec is an array; expected a JSON object"},
    {"missing command", R"({"name": "x"})", {}, "/command: missing"},
    {"command is a string", R"({"command": "python3 train.py"})", {}, "/command: \"python3 train.py\" is a string; expected an array of strings"},
    {"empty command", R"({"command": []})", {}, "/command: [] is empty"},
    {"empty program", R"({"command": [""]})", {}, "/command/0: \"\" is empty"},
    {"command element not a string", R"({"command": ["python3", 5]})", {}, "/command/1: 5 is an integer; every element must be a string"},
    {"unknown top-level key with suggestion", R"({"command": ["a"], "comand": ["b"]})", {}, "/comand: unknown key; did you mean \"command\"?"},
    {"unknown key without suggestion", R"({"command": ["a"], "zzz": 1})", {}, "/zzz: unknown key at the top level; expected one of: version, name, command"},
    {"misspelt cluster key", R"({"command": ["a"], "cluster": {"instancs": 2}})", {}, "/cluster/instancs: unknown key; did you mean \"instances\"?"},
    {"misspelt batch key", R"({"command": ["a"], "batch": {"per_replca": 2}})", {}, "/batch/per_replca: unknown key; did you mean \"per_replica\"?"},
    {"duplicate key", R"({"command": ["a"], "grace_s": 1, "grace_s": 2})", {}, "/grace_s: duplicate key"},
    {"nested duplicate key", R"({"command": ["a"], "batch": {"global": 8, "global": 16}})", {}, "/batch/global: duplicate key"},
    {"unsupported version", R"({"version": 2, "command": ["a"]})", {}, "/version: 2 is not supported; this dtrain reads job spec version 1"},
    {"version as string", R"({"version": "1", "command": ["a"]})", {}, "/version: \"1\" is a string; expected an integer 1"},
    {"bad job name", R"({"name": "my job!", "command": ["a"]})", {}, "/name: \"my job!\" is not a valid job name"},
    {"empty workdir", R"({"command": ["a"], "workdir": ""})", {}, "/workdir: \"\" is empty"},
    {"cluster not an object", R"({"command": ["a"], "cluster": 4})", {}, "/cluster: 4 is an integer; expected an object"},
    {"zero instances", R"({"command": ["a"], "cluster": {"instances": 0}})", {}, "/cluster/instances: 0 is out of range; expected an integer from 1 to 65536"},
    {"negative instances", R"({"command": ["a"], "cluster": {"instances": -2}})", {}, "/cluster/instances: -2 is out of range"},
    {"fractional instances", R"({"command": ["a"], "cluster": {"instances": 1.5}})", {}, "/cluster/instances: 1.5 is a fractional number; expected an integer"},
    {"instances as string", R"({"command": ["a"], "cluster": {"instances": "2"}})", {}, "/cluster/instances: \"2\" is a string; expected an integer"},
    {"gpus word not auto", R"({"command": ["a"], "cluster": {"gpus_per_instance": "all"}})", {}, "/cluster/gpus_per_instance: \"all\" is not a count; expected \"auto\" or an integer"},
    {"zero gpus", R"({"command": ["a"], "cluster": {"gpus_per_instance": 0}})", {}, "for CPU workers set /cluster/procs_per_instance instead"},
    {"gpus and procs both", R"({"command": ["a"], "cluster": {"gpus_per_instance": 2, "procs_per_instance": 4}})", {}, "/cluster/procs_per_instance: 4 conflicts with /cluster/gpus_per_instance 2"},
    {"too many procs", R"({"command": ["a"], "cluster": {"procs_per_instance": 100000}})", {}, "/cluster/procs_per_instance: 100000 is out of range"},
    {"bind_gpus not boolean", R"({"command": ["a"], "cluster": {"bind_gpus": "yes"}})", {}, "/cluster/bind_gpus: \"yes\" is a string; expected true or false"},
    {"global not divisible by world", R"({"command": ["a"], "cluster": {"instances": 2, "gpus_per_instance": 8}, "rendezvous": {"endpoint": "10.0.0.1:29400"}, "batch": {"global": 500}})", {}, "/batch/global: 500 does not divide by world size 16"},
    {"global and per_replica disagree", R"({"command": ["a"], "cluster": {"procs_per_instance": 4}, "batch": {"global": 100, "per_replica": 32}})", {}, "/batch/global: 100 is not world size 4 x per_replica 32 = 128"},
    {"per_replica not divisible by micro_batches", R"({"command": ["a"], "batch": {"per_replica": 30, "micro_batches": 4}})", {}, "/batch/per_replica: 30 does not divide by micro_batches 4"},
    {"global gives indivisible per_replica", R"({"command": ["a"], "cluster": {"procs_per_instance": 2}, "batch": {"global": 12, "micro_batches": 4}})", {}, "/batch/global: 12 gives per_replica 6 at world size 2, which does not divide by micro_batches 4"},
    {"batch without sizes", R"({"command": ["a"], "batch": {"epochs": 2}})", {}, "/batch: gives neither per_replica nor global"},
    {"zero per_replica", R"({"command": ["a"], "batch": {"per_replica": 0}})", {}, "/batch/per_replica: 0 is out of range"},
    {"negative dataset", R"({"command": ["a"], "batch": {"per_replica": 2, "dataset_size": -5}})", {}, "/batch/dataset_size: -5 is out of range"},
    {"zero epochs", R"({"command": ["a"], "batch": {"per_replica": 2, "epochs": 0}})", {}, "/batch/epochs: 0 is out of range"},
    {"zero micro_batches", R"({"command": ["a"], "batch": {"per_replica": 2, "micro_batches": 0}})", {}, "/batch/micro_batches: 0 is out of range"},
    {"endpoint without port", R"({"command": ["a"], "rendezvous": {"endpoint": "10.0.0.1"}})", {}, "/rendezvous/endpoint: '10.0.0.1' is not HOST:PORT"},
    {"endpoint port out of range", R"({"command": ["a"], "rendezvous": {"endpoint": "10.0.0.1:70000"}})", {}, "/rendezvous/endpoint: port 70000 in '10.0.0.1:70000' is out of range 1-65535"},
    {"endpoint port not a number", R"({"command": ["a"], "rendezvous": {"endpoint": "h:http"}})", {}, "port 'http' in 'h:http' is not a number"},
    {"endpoint empty host", R"({"command": ["a"], "rendezvous": {"endpoint": ":29400"}})", {}, "has an empty host"},
    {"zero join timeout", R"({"command": ["a"], "rendezvous": {"join_timeout_s": 0}})", {}, "/rendezvous/join_timeout_s: 0 is out of range; expected a number > 0"},
    {"heartbeat timeout not longer than heartbeat", R"({"command": ["a"], "rendezvous": {"heartbeat_s": 5, "heartbeat_timeout_s": 5}})", {}, "/rendezvous/heartbeat_timeout_s: 5 is not longer than heartbeat_s 5"},
    {"bad run id", R"({"command": ["a"], "rendezvous": {"run_id": "a/b"}})", {}, "/rendezvous/run_id: \"a/b\" is not a valid run id"},
    {"negative restarts", R"({"command": ["a"], "restart": {"max_restarts": -1}})", {}, "/restart/max_restarts: -1 is out of range; expected an integer from 0 to 10000"},
    {"negative backoff", R"({"command": ["a"], "restart": {"backoff_s": -3}})", {}, "/restart/backoff_s: -3 is out of range"},
    {"env value a number", R"({"command": ["a"], "env": {"OMP_NUM_THREADS": 4}})", {}, "/env/OMP_NUM_THREADS: 4 is not a string; environment values are strings, e.g. \"4\""},
    {"env sets a contract variable", R"({"command": ["a"], "env": {"WORLD_SIZE": "8"}})", {}, "/env/WORLD_SIZE: WORLD_SIZE is set by dtrain for every worker"},
    {"env bad name", R"({"command": ["a"], "env": {"1BAD": "x"}})", {}, "/env/1BAD: \"1BAD\" is not a valid environment variable name"},
    {"env not an object", R"({"command": ["a"], "env": ["A=1"]})", {}, "/env: [\"A=1\"] is an array; expected an object of strings"},
    {"tag_format unknown field", R"({"command": ["a"], "output": {"tag_format": "[{rnk}] "}})", {}, "/output/tag_format: \"[{rnk}] \" uses unknown field {rnk} (did you mean {rank}?)"},
    {"tag_format unclosed brace", R"({"command": ["a"], "output": {"tag_format": "[{rank"}})", {}, "has an unclosed '{'"},
    {"timestamps not boolean", R"({"command": ["a"], "output": {"timestamps": 1}})", {}, "/output/timestamps: 1 is an integer; expected true or false"},
    {"straggler_share above 1", R"({"command": ["a"], "output": {"straggler_share": 1.5}})", {}, "/output/straggler_share: 1.5 is out of range"},
    {"negative grace", R"({"command": ["a"], "grace_s": -1})", {}, "/grace_s: -1 is out of range"},
    {"zero max runtime", R"({"command": ["a"], "max_runtime_s": 0})", {}, "/max_runtime_s: 0 is out of range"},
    {"multi-node without rendezvous", R"({"command": ["a"], "cluster": {"instances": 2}})", {}, "/rendezvous/endpoint: unset, but the job has 2 nodes"},
    {"--set without =", R"({"command": ["a"]})", {"--set", "/batch/global"}, "--set: '/batch/global' is not /json/pointer=value"},
    {"--set not a pointer", R"({"command": ["a"]})", {"--set", "batch.global=4"}, "--set: 'batch.global=4' is not /json/pointer=value"},
    {"--set an invalid value", R"({"command": ["a"]})", {"--set", "/cluster/instances=0"}, "/cluster/instances: 0 is out of range; expected an integer from 1 to 65536, or {\"min\": A, \"max\": B} with A <= B in that range (from --set /cluster/instances)"},
    {"--set an unknown key", R"({"command": ["a"]})", {"--set", "/clustr/instances=2"}, "/clustr: unknown key; did you mean \"cluster\"? (from --set /clustr/instances)"},
    {"--set into a string", R"({"command": ["a"], "name": "n"})", {"--set", "/name/x=1"}, "--set: cannot set /name/x"},
    {"--nodes zero", R"({"command": ["a"]})", {"--nodes", "0"}, "--nnodes: 0 is out of range; expected an integer from 1 to 65536"},
    {"--node-rank not below --nodes", R"({"command": ["a"]})", {"--nodes", "2", "--node-rank", "2", "--rdzv", "h:1"}, "--node-rank: node rank 2 is not below the node count: --node-rank 2 (flags) but --nnodes 2 (flags)"},
    {"--node-rank beyond the spec's instances", R"({"command": ["a"], "cluster": {"instances": 2}, "rendezvous": {"endpoint": "h:1"}})", {"--node-rank", "5"}, "node rank 5 is not below the node count: --node-rank 5 (flags) but /cluster/instances 2 (job spec)"},
    {"--nproc-per-node zero", R"({"command": ["a"]})", {"--nproc-per-node", "0"}, "--nproc-per-node: 0 is out of range"},
    {"--rdzv malformed", R"({"command": ["a"]})", {"--rdzv", "host:x"}, "--rdzv-endpoint: port 'x' in 'host:x' is not a number"},
    {"--rdzv port out of range", R"({"command": ["a"]})", {"--rdzv", "host:0"}, "--rdzv-endpoint: port 0 in 'host:0' is out of range 1-65535"},
    {"--nodes not a number", R"({"command": ["a"]})", {"--nodes", "two"}, "--nnodes: 'two' is not a node count"},
    {"unknown flag", R"({"command": ["a"]})", {"--nodse", "2"}, "--nodse"},
};

std::string write_spec(const TempDir& dir, const char* text) { return dir.write("job.json", text); }

}  // namespace

TEST_SUITE("cli::cmd_plan") {
  TEST_CASE("bad specs and flags: exit 2 with a message naming the problem") {
    CHECK(std::size(kBadSpecs) >= 40);
    TempDir dir;
    for (const auto& c : kBadSpecs) {
      std::vector<std::string> argv = {DTRAIN_BIN, "plan", write_spec(dir, c.spec)};
      argv.insert(argv.end(), c.args.begin(), c.args.end());
      auto r = run(argv);
      INFO("case: " << std::string(c.name) << "\nstderr:\n" << r.err);
      CHECK(r.status == 2);
      CHECK(r.err.find(c.fragment) != std::string::npos);
      CHECK(r.out.empty());
    }
  }

  TEST_CASE("spec errors end with a pointer to dtrain-job(5), and list every problem") {
    TempDir dir;
    auto r = run({DTRAIN_BIN, "plan", write_spec(dir, R"({"command": [], "grace_s": -1, "zzz": 1})")});
    CHECK(r.status == 2);
    CHECK(r.err.find("job.json: 3 problems:") != std::string::npos);
    CHECK(r.err.find("man 5 dtrain-job") != std::string::npos);
  }

  TEST_CASE("missing, unreadable and absent job files") {
    auto r = run({DTRAIN_BIN, "plan", "/nonexistent/job.json"});
    CHECK(r.status == 2);
    CHECK(r.err.find("job file /nonexistent/job.json: no such file") != std::string::npos);
    r = run({DTRAIN_BIN, "plan", "/tmp/dtrain-test.json"});
    CHECK(r.status == 2);
    CHECK(r.err.find("no such file") != std::string::npos);
    r = run({DTRAIN_BIN, "plan", "/tmp"});  // not a job file (no .json): a script, and not a file
    CHECK(r.status == 2);
    CHECK(r.err.find("/tmp: is not a file") != std::string::npos);
    r = run({DTRAIN_BIN, "plan"});
    CHECK(r.status == 2);
    CHECK(r.err.find("no job given; usage: dtrain plan JOB.json") != std::string::npos);
  }

  TEST_CASE("the seed's example in text form: 10 iterations per epoch, 2 x 4 GPUs are 8") {
    auto r = run({DTRAIN_BIN, "plan", DTRAIN_SOURCE_DIR "/examples/jobs/seed-5000.json"});
    INFO(r.err);
    REQUIRE(r.status == 0);
    CHECK(r.out.find("1 instance x 4 CPU workers = world size 4") != std::string::npos);
    CHECK(r.out.find("global 500 = 4 replicas x per-replica 125") != std::string::npos);
    CHECK(r.out.find("5000 samples: 10 iterations per epoch x 3 epochs = 30 iterations") != std::string::npos);
    CHECK(r.out.find("  rank  node  local") != std::string::npos);
    TempDir dir;
    r = run({DTRAIN_BIN, "plan",
             write_spec(dir, R"({"command": ["a"], "cluster": {"instances": 2, "gpus_per_instance": 4},
                                 "rendezvous": {"endpoint": "10.0.0.1:29400"}, "batch": {"global": 500, "dataset_size": 5000}})")});
    CHECK(r.status == 2);  // 500 does not divide by 8
    CHECK(r.err.find("/batch/global: 500 does not divide by world size 8") != std::string::npos);
    r = run({DTRAIN_BIN, "plan",
             write_spec(dir, R"({"command": ["true"], "cluster": {"instances": 2, "gpus_per_instance": 4},
                                 "rendezvous": {"endpoint": "10.0.0.1:29400"}, "batch": {"global": 512, "dataset_size": 5000}})"),
             "--insecure"});
    REQUIRE(r.status == 0);
    CHECK(r.out.find("2 instances x 4 GPU workers = world size 8") != std::string::npos);
    CHECK(r.out.find("     7     1      3") != std::string::npos);
  }

  TEST_CASE("--json: the plan as one JSON object, the spec's values and the flags applied") {
    // Every key of the object: plan_to_json in tests/config/test_plan.cpp. Here: the CLI prints it
    // whole, for this spec file and --node-rank.
    auto r = run({DTRAIN_BIN, "plan", DTRAIN_SOURCE_DIR "/examples/jobs/bert-dp.json", "--json", "--node-rank", "1",
                  "--insecure"});
    INFO(r.err);
    REQUIRE(r.status == 0);
    json j = json::parse(r.out);
    CHECK(j["node_rank"] == 1);
    CHECK(j["ranks"][6] == json{{"rank", 6}, {"node_rank", 1}, {"local_rank", 2}, {"dp_rank", 6}, {"pp_rank", 0}, {"tp_rank", 0}});
    CHECK(j["batch"]["total_iterations"] == 200);
    CHECK(j["env"]["OMP_NUM_THREADS"] == "4");
  }

  TEST_CASE("overrides: --set, --nodes, --nproc-per-node, --rdzv, --token-file") {
    TempDir dir;
    std::string tok = dir.write("tok", "0123456789abcdef0123456789abcdef\n");
    std::filesystem::permissions(tok, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    auto r = run({DTRAIN_BIN, "plan", DTRAIN_SOURCE_DIR "/examples/jobs/seed-5000.json", "--json", "--set",
                  "/batch/global=1500", "--set=/name=renamed", "--nodes", "3", "--node-rank", "2", "--nproc-per-node", "5",
                  "--rdzv", "10.1.2.3:4000", "--token-file", tok});
    INFO(r.err);
    REQUIRE(r.status == 0);
    json j = json::parse(r.out);
    CHECK(j["name"] == "renamed");
    CHECK(j["instances"] == 3);
    CHECK(j["node_rank"] == 2);
    CHECK(j["procs_per_instance"] == 5);
    CHECK(j["world_size"] == 15);
    CHECK(j["batch"]["global"] == 1500);
    CHECK(j["batch"]["per_replica"] == 100);
    CHECK(j["rendezvous"]["endpoint"] == "10.1.2.3:4000");
    CHECK(j["rendezvous"]["source"] == "flags");
    CHECK(j["rendezvous"]["token_file"] == tok);
    CHECK(j["slots_source"] == "flags");
  }

  TEST_CASE("identity from the environment of the dtrain process") {
    TempDir dir;
    std::string job = write_spec(dir, R"({"command": ["true"], "cluster": {"procs_per_instance": 2}, "batch": {"per_replica": 4}})");
    auto env = base_env();
    env["DTRAIN_RDZV_TOKEN"] = "0123456789abcdef0123456789abcdef";  // several nodes: a token, as launch needs
    env["SLURM_JOB_NODELIST"] = "gpu[01-03,07],login2,x[9-11]";
    env["SLURM_NODEID"] = "5";
    env["SLURM_NNODES"] = "8";
    env["SLURM_JOB_ID"] = "4242";
    auto r = run({DTRAIN_BIN, "plan", job, "--json"}, env);
    INFO(r.err);
    REQUIRE(r.status == 0);
    json j = json::parse(r.out);
    CHECK(j["identity_source"] == "slurm");
    CHECK(j["instances"] == 8);
    CHECK(j["node_rank"] == 5);
    CHECK(j["host"] == "x9");
    CHECK(j["master_addr"] == "gpu01");
    CHECK(j["run_id"] == "slurm-4242");
    CHECK(j["world_size"] == 16);
    CHECK(j["batch"]["global"] == 64);
    CHECK(j["rendezvous"]["endpoint"] == "gpu01:29400");
    // The text form names the source too.
    r = run({DTRAIN_BIN, "plan", job}, env);
    CHECK(r.out.find("identity    slurm") != std::string::npos);
    // Flags that contradict the allocation are refused, naming both sources.
    r = run({DTRAIN_BIN, "plan", job, "--node-rank", "1"}, env);
    CHECK(r.status == 2);
    CHECK(r.err.find("--node-rank 1 (flags) disagrees with SLURM_NODEID=5 (slurm)") != std::string::npos);
    // torch env, and a worker's env that is ignored.
    auto torch = base_env();
    torch["DTRAIN_RDZV_TOKEN"] = "0123456789abcdef0123456789abcdef";
    torch["MASTER_ADDR"] = "10.4.4.4";
    torch["MASTER_PORT"] = "29500";
    torch["RANK"] = "1";
    torch["WORLD_SIZE"] = "2";
    r = run({DTRAIN_BIN, "plan", job, "--json"}, torch);
    REQUIRE(r.status == 0);
    j = json::parse(r.out);
    CHECK(j["identity_source"] == "torch-env");
    CHECK(j["node_rank"] == 1);
    CHECK(j["master_port"] == 29500);
    torch["LOCAL_RANK"] = "0";
    r = run({DTRAIN_BIN, "plan", job, "--json"}, torch);
    REQUIRE(r.status == 0);
    CHECK(json::parse(r.out)["identity_source"] == "default");
    // SageMaker.
    auto sm = base_env();
    sm["DTRAIN_RDZV_TOKEN"] = "0123456789abcdef0123456789abcdef";
    sm["SM_HOSTS"] = R"(["algo-2","algo-1"])";
    sm["SM_CURRENT_HOST"] = "algo-2";
    sm["SM_NUM_GPUS"] = "4";
    r = run({DTRAIN_BIN, "plan", write_spec(dir, R"({"command": ["true"]})"), "--json"}, sm);
    REQUIRE(r.status == 0);
    j = json::parse(r.out);
    CHECK(j["identity_source"] == "sagemaker");
    CHECK(j["node_rank"] == 1);
    CHECK(j["procs_per_instance"] == 4);
    CHECK(j["use_gpus"] == true);
    CHECK(j["master_addr"] == "algo-1");
  }

  TEST_CASE("gpus_per_instance auto counts GPUs (DTRAIN_TEST_GPUS), else CPU slots") {
    TempDir dir;
    std::string job = write_spec(dir, R"({"command": ["true"], "cluster": {"gpus_per_instance": "auto"}})");
    auto env = base_env();
    env["DTRAIN_TEST_GPUS"] = "3";
    auto r = run({DTRAIN_BIN, "plan", job, "--json"}, env);
    REQUIRE(r.status == 0);
    json j = json::parse(r.out);
    CHECK(j["procs_per_instance"] == 3);
    CHECK(j["use_gpus"] == true);
    env["DTRAIN_TEST_GPUS"] = "0";
    r = run({DTRAIN_BIN, "plan", job, "--json"}, env);
    REQUIRE(r.status == 0);
    j = json::parse(r.out);
    CHECK(j["use_gpus"] == false);
    CHECK(j["slots_source"] == "cpu cores");
    CHECK(j["procs_per_instance"].get<int>() >= 1);
  }

  TEST_CASE("every example job plans") {
    // Every file of examples/jobs, with its command replaced (the examples' programs may not be
    // built where the test runs) and a token file of its own (every-field.json names one).
    TempDir t;
    const std::string token = t.write("token", "example-token-0123456789abcdef0123");
    std::filesystem::permissions(token, std::filesystem::perms(0600));
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator(DTRAIN_SOURCE_DIR "/examples/jobs")) {
      if (e.path().extension() != ".json") continue;
      ++n;
      auto r = run({DTRAIN_BIN, "plan", e.path().string(), "--token-file", token, "--set", R"(/command=["true"])"});
      INFO(e.path().filename().string() << "\n" << r.err);
      CHECK(r.status == 0);
    }
    CHECK(n >= 6);
  }
}
