// torchrun's flags with torchrun's meanings, and the checks `dtrain plan` shares with `dtrain launch`
// (cli/spec_options.cpp), through the real binary.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dtrain/common/net.hpp"
#include "plan_run.hpp"

namespace {

// The first line of stderr that starts with "dtrain: " (the message of a refusal).
std::string message(const std::string& err) {
  auto at = err.find("dtrain: ");
  return at == std::string::npos ? err : err.substr(at, err.find('\n', at) - at);
}

}  // namespace

TEST_SUITE("cli::spec_options") {
  TEST_CASE("--set before the job file takes one /PTR=VALUE; the job file stays the job file") {
    TempDir t;
    auto job = t.write("job.json", R"({"command": ["true"], "cluster": {"procs_per_instance": 2}})");
    for (std::vector<std::string> args : {std::vector<std::string>{"--set", "/cluster/procs_per_instance=3", job},
                                          {"--set=/cluster/procs_per_instance=3", job},
                                          {"--set", "/batch/global=12", "--set", "/cluster/procs_per_instance=3", job}}) {
      CAPTURE(args.front());
      auto p = ok(plan(args));
      CHECK(p["world_size"] == 3);
    }
  }

  TEST_CASE("--nnodes N, N:N and an elastic MIN:MAX; a bad count or range is refused with what to do") {
    CHECK(ok(plan({"--nnodes", "2:2", "--insecure", "--rdzv-endpoint", "h:1", "--", "/bin/true"}))["instances"] == 2);
    CHECK(ok(plan({"--nodes", "1", "--", "/bin/true"}))["instances"] == 1);
    auto j = ok(plan({"--nnodes", "1:4", "--insecure", "--rdzv-endpoint", "h:1", "--", "/bin/true"}));
    CHECK(j["instances"] == 4);
    CHECK(j["min_instances"] == 1);
    auto r = plan({"--nnodes", "3:2", "--", "/bin/true"});
    CHECK(r.status == 2);
    CHECK(has(r.err, "--nnodes: min 3 is more than max 2; expected min <= max"));
    r = plan({"--nnodes", "two", "--", "/bin/true"});
    CHECK(r.status == 2);
    CHECK(has(r.err, "--nnodes: 'two' is not a node count"));
  }

  TEST_CASE("--nproc-per-node N, gpu, cpu, auto") {
    auto gpus = base_env();
    gpus["DTRAIN_TEST_GPUS"] = "3";
    json j = ok(plan({"--nproc-per-node", "gpu", "--", "/bin/true"}, gpus));
    CHECK(j["procs_per_instance"] == 3);
    CHECK(j["use_gpus"] == true);
    j = ok(plan({"--nproc-per-node", "auto", "--", "/bin/true"}, gpus));
    CHECK(j["procs_per_instance"] == 3);
    j = ok(plan({"--nproc-per-node", "cpu", "--", "/bin/true"}, gpus));
    CHECK(j["use_gpus"] == false);
    CHECK(j["procs_per_instance"].get<int>() >= 1);
    auto r = plan({"--nproc-per-node", "gpu", "--", "/bin/true"});  // DTRAIN_TEST_GPUS=0
    CHECK(r.status == 2);
    CHECK(has(r.err, "--nproc-per-node: gpu: no GPU is visible on this node"));
    r = plan({"--nproc-per-node", "many", "--", "/bin/true"});
    CHECK(r.status == 2);
    CHECK(has(r.err, "'many' is not a worker count; expected a number, gpu, cpu or auto"));
  }

  TEST_CASE("--standalone: one node whatever the environment says") {
    auto slurm = base_env();
    slurm["SLURM_JOB_NODELIST"] = "n[1-4]";
    slurm["SLURM_NODEID"] = "2";
    json j = ok(plan({"--standalone", "--", "/bin/true"}, slurm));
    CHECK(j["instances"] == 1);
    CHECK(j["node_rank"] == 0);
    CHECK(j["rendezvous"]["endpoint"].is_null());
    auto r = plan({"--standalone", "--nnodes", "2", "--", "/bin/true"});
    CHECK(r.status == 2);
    CHECK(has(r.err, "--standalone: runs one node with a rendezvous of its own, but --nnodes 2 is given too"));
  }

  TEST_CASE("--rdzv-endpoint without a port, --rdzv-id, --rdzv-backend, --max-restarts") {
    json j = ok(plan({"--rdzv-endpoint", "10.0.0.1", "--rdzv-id", "job7", "--rdzv-backend", "c10d", "--max-restarts",
                      "3", "--insecure", "--", "/bin/true"}));
    CHECK(j["rendezvous"]["endpoint"] == "10.0.0.1:29400");
    CHECK(j["run_id"] == "job7");
    CHECK(j["restart"]["max_restarts"] == 3);
    CHECK(j["rendezvous"]["backend"] == "builtin");
    j = ok(plan({"--rdzv-backend", "etcd-v2", "--rdzv-endpoint", "10.0.0.5:2379", "--insecure", "--", "/bin/true"}));
    CHECK(j["rendezvous"]["backend"] == "etcd");
    CHECK(j["rendezvous"]["endpoint"] == "10.0.0.5:2379");
    auto r = plan({"--rdzv-backend", "etcd", "--", "/bin/true"});
    CHECK(r.status == 2);
    CHECK(has(r.err, "/rendezvous/endpoint: unset, but rendezvous.backend is \"etcd\""));
    r = plan({"--rdzv-backend", "etcd", "--rdzv-endpoint", "10.0.0.5:2379", "--", "/bin/true"});
    CHECK(r.status == 2);
    CHECK(has(r.err, "neither TLS nor etcd authentication"));
    r = plan({"--rdzv-backend", "zookeeper", "--", "/bin/true"});
    CHECK(r.status == 2);
    CHECK(has(r.err, "--rdzv-backend: \"zookeeper\" is not a rendezvous backend"));
    r = plan({"--rdzv-id", "a/b", "--", "/bin/true"});
    CHECK(r.status == 2);
    CHECK(has(r.err, "--rdzv-id: \"a/b\" is not a valid run id"));
  }

  TEST_CASE("--straggler-share is output.straggler_share (0.2 unless set); a share outside 0 to 1 is refused") {
    CHECK(ok(plan({"--", "/bin/true"}))["output"]["straggler_share"] == 0.2);
    CHECK(ok(plan({"--straggler-share", "0.05", "--", "/bin/true"}))["output"]["straggler_share"] == 0.05);
    auto r = plan({"--straggler-share", "2", "--", "/bin/true"});
    CHECK(r.status == 2);
    CHECK(has(r.err, "--straggler-share: 2 is out of range; expected a number from 0 to 1"));
  }

  TEST_CASE("--master-addr, --master-port and the exported MASTER_PORT are the plan's, exactly") {
    json j = ok(plan({"--master-addr", "10.0.0.9", "--master-port", "29511", "--nnodes", "2", "--node-rank", "0",
                      "--insecure", "--", "/bin/true"}));
    CHECK(j["master_addr"] == "10.0.0.9");
    CHECK(j["master_port"] == 29511);
    CHECK(j["rendezvous"]["endpoint"] == "10.0.0.9:29400");  // the rendezvous keeps torchrun's port
    auto env = base_env();
    env["MASTER_PORT"] = "29512";
    CHECK(ok(plan({"--", "/bin/true"}, env))["master_port"] == 29512);
    auto r = plan({"--master-addr", "h", "--master-port", "29400", "--nnodes", "2", "--insecure", "--", "/bin/true"});
    CHECK(r.status == 2);
    CHECK(has(r.err, "--master-port: 29400 is also the port of the rendezvous derived from the master address"));
  }

  TEST_CASE("plan refuses a multi-node job without a token exactly as launch does") {
    int port = dtrain::net::pick_free_port("127.0.0.1");
    std::vector<std::string> args{"--nnodes", "2", "--node-rank", "0", "--rdzv-endpoint",
                                  "127.0.0.1:" + std::to_string(port), "--", "/bin/true"};
    std::vector<std::string> p{DTRAIN_BIN, "plan"}, l{DTRAIN_BIN, "launch", "--no-progress"};
    p.insert(p.end(), args.begin(), args.end());
    l.insert(l.end(), args.begin(), args.end());
    Result rp = run(p), rl = run(l, base_env(), 60);
    CHECK(rp.status == 2);
    CHECK(rl.status == rp.status);
    CHECK(has(rp.err, "has no token"));
    CHECK(message(rp.err) == message(rl.err));
    auto env = base_env();
    env["DTRAIN_RDZV_TOKEN"] = "0123456789abcdef0123456789abcdef";
    CHECK(run(p, env).status == 0);
    p.insert(p.begin() + 2, "--insecure");
    CHECK(run(p).status == 0);
  }

  TEST_CASE("plan refuses a command that is not there with launch's message and status (127, 126)") {
    TempDir t;
    std::string job = t.write("job.json", R"({"command": ["no-such-program-dtrain-test"]})");
    Result rp = run({DTRAIN_BIN, "plan", job}), rl = run({DTRAIN_BIN, "launch", job});
    CHECK(rp.status == 127);
    CHECK(rl.status == 127);
    CHECK(has(rp.err, "dtrain: command not found: 'no-such-program-dtrain-test'"));
    CHECK(message(rp.err) == message(rl.err));
    std::string file = t.write("w.sh", "#!/bin/sh\n");  // not executable
    rp = run({DTRAIN_BIN, "plan", "--", file});
    rl = run({DTRAIN_BIN, "launch", "--", file});
    CHECK(rp.status == 126);
    CHECK(rl.status == 126);
    CHECK(message(rp.err) == message(rl.err));
  }
}
