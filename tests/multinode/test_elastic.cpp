// Elastic jobs on loopback (cluster.instances {min, max}): `dtrain launch` processes of the real
// binary lose a node or gain one mid-run, and the job goes on in the next generation at its new
// size, with the collectives bootstrapped again and the batch plan recomputed.
#include <doctest/doctest.h>

#include <regex>

#include "../examples/weights.hpp"
#include "multinode_util.hpp"

using namespace mn;

namespace {

std::vector<double> weights_of(const fs::path& p) {
  std::vector<double> w;
  for (const auto& line : agent_test::lines_of(agent_test::slurp(p))) w.push_back(std::stod(line));
  return w;
}

// The highest k of the step-<k>.ckpt files in `dir` (-1 when none).
long newest_step(const fs::path& dir) {
  long best = -1;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    std::string name = e.path().filename().string();
    if (std::regex_match(name, m, std::regex(R"(step-(\d+)\.ckpt)"))) best = std::max(best, std::stol(m[1]));
  }
  return best;
}

// "resumed from step 37 (...)" in `out`: 37, or -1.
long resumed_step(const std::string& out) {
  std::smatch m;
  return std::regex_search(out, m, std::regex(R"(resumed from step (\d+) )")) ? std::stol(m[1]) : -1;
}

}  // namespace

TEST_SUITE("agent::multinode::elastic") {

TEST_CASE("an elastic 2:3 job of three nodes loses one mid-run: the other two finish in generation 1 at world size 4") {
  Job j(kElastic, 2, elastic_script(), kElasticExtra);
  // the barrier closes once all three are in (it is full); the last call bounds the wait for the third
  std::vector<std::string> wait{"--set", "/rendezvous/last_call_s=3"};
  Node n0 = j.node(0, wait), n1 = j.node(1, wait), n2 = j.node(2, wait);
  REQUIRE_MESSAGE(j.all_env(6, 0), err_of(n0));  // 6 ranks in generation 0
  CHECK(env_file(j.t.path / "env-5-0")["WORLD_SIZE"] == "6");
  CHECK(env_file(j.t.path / "env-5-0")["DTRAIN_PER_REPLICA_BATCH"] == "4");
  ::kill(n2.pid, SIGKILL);
  CHECK(finish(n2, 10) == 128 + SIGKILL);
  check_went_on_with_two(j, n0, n1, 2);
  for (int r = 0; r < 4; ++r)  // node 0 keeps its rank; node 1 is the second
    CHECK(env_file(j.t.path / fmt::format("env-{}-1", r))["DTRAIN_NODE_RANK"] == std::to_string(r / 2));
  CHECK(j.no_workers_left());
}

TEST_CASE("a node that joins a running elastic job waits for generation 1, which runs on three nodes") {
  Job j(kElastic, 1, elastic_script(), kElasticExtra);
  std::vector<std::string> quick{"--set", "/rendezvous/last_call_s=0.5"};
  Node n0 = j.node(0, quick), n1 = j.node(1, quick);
  REQUIRE_MESSAGE(j.all_env(2, 0), err_of(n0));  // two nodes are min: generation 0 runs at world size 2
  CHECK(env_file(j.t.path / "env-1-0")["WORLD_SIZE"] == "2");
  Node n2 = j.node(2, quick);
  CHECK_MESSAGE(finish(n0, 90) == 0, err_of(n0));
  CHECK_MESSAGE(finish(n1, 90) == 0, err_of(n1));
  CHECK_MESSAGE(finish(n2, 90) == 0, err_of(n2));
  std::string out = agent_test::slurp(n0.out) + agent_test::slurp(n1.out) + agent_test::slurp(n2.out);
  for (int r = 0; r < 3; ++r) CHECK_MESSAGE(out.find(fmt::format("rank {}/3 ok", r)) != std::string::npos, out);
  for (int r = 0; r < 3; ++r) {
    auto e = env_file(j.t.path / fmt::format("env-{}-1", r));
    CAPTURE(r);
    CHECK(e["WORLD_SIZE"] == "3");
    CHECK(e["DTRAIN_NNODES"] == "3");
    CHECK(e["DTRAIN_PER_REPLICA_BATCH"] == "8");
  }
  CHECK_FALSE(j.have_env(2, 0));  // the newcomer never ran in generation 0
  std::string e0 = err_of(n0);
  CHECK_MESSAGE(e0.find("joins: the job moves to generation 1 with 3 nodes") != std::string::npos, e0);
  CHECK(j.no_workers_left());
}

TEST_CASE("an elastic job at its maximum refuses one more node, and a node of another job, with a named error (2)") {
  Job j(R"({"min": 1, "max": 2})", 1, "exec sleep 60", R"(, "restart": {"max_restarts": 1})");
  Node n0 = j.node(0), n1 = j.node(1);
  REQUIRE(j.all_env(2, 0));
  Node n2 = start(j.t, "node2", {j.job, "--no-progress"});  // no node rank: the rendezvous would pick one
  CHECK(finish(n2, 30) == 2);
  std::string e2 = err_of(n2);
  CHECK_MESSAGE(e2.find("the elastic job runs with its maximum of 2 nodes") != std::string::npos, e2);
  // a node of another job is refused before it could stop this one
  Node other = start(j.t, "other", {j.job, "--no-progress", "--set", "/cluster/procs_per_instance=2"});
  CHECK(finish(other, 30) == 2);
  std::string eo = err_of(other);
  CHECK_MESSAGE(eo.find("spec mismatch") != std::string::npos, eo);
  CHECK_FALSE(j.have_env(0, 1));  // the running job never restarted
  ::kill(n0.pid, SIGTERM);
  ::kill(n1.pid, SIGTERM);
  CHECK(finish(n0, 30) == 143);
  CHECK(finish(n1, 30) == 143);
  CHECK(j.no_workers_left());
}

TEST_CASE("the demo worker after an elastic shrink ends with the weights of a run started at that size from the same checkpoint") {
  const fs::path worker = DEMO_WORKER;
  // rank 0 of a later generation keeps the checkpoints it resumes from, for run B; in A's generation 0
  // the steps are paced (15 ms each, 200 of them) so that the job still runs when the test has seen
  // step 20 and kills node 2; what runs after that waits on nothing and is not paced
  const auto script = [&](const char* pace) {
    return fmt::format(
        "if [ \"$DTRAIN_GENERATION\" != 0 ] && [ \"$RANK\" = 0 ]; then cp -r \"$DTRAIN_CHECKPOINT_DIR\" "
        "\"$T/resume-$DTRAIN_GENERATION\"; fi; exec '{}' --float64 --checkpoint-every 1 --step-sleep-ms {} "
        "--weights-out \"$T/weights-$DTRAIN_GENERATION\"",
        worker.string(), pace);
  };
  const std::string extra = R"(, "batch": {"global": 24, "dataset_size": 2400, "epochs": 2}, "restart": {"max_restarts": 1})";

  // A: three nodes of an elastic 2:3 job; node 2 is SIGKILLed mid-run, the other two finish from the checkpoint
  Job a(kElastic, 1, script("$((DTRAIN_GENERATION == 0 ? 15 : 0))"), extra);
  const fs::path ckpt = a.t.path / "ckpt";
  std::vector<std::string> more{"--set", "/rendezvous/last_call_s=3", "--set", "/restart/checkpoint_dir=" + ckpt.string()};
  Node n0 = a.node(0, more), n1 = a.node(1, more), n2 = a.node(2, more);
  REQUIRE_MESSAGE(agent_test::wait_until([&] { return newest_step(ckpt) >= 20; }, 90), err_of(n0));
  REQUIRE(a.all_env(3, 0));  // it ran at world size 3
  ::kill(n2.pid, SIGKILL);
  CHECK_MESSAGE(finish(n0, 120) == 0, err_of(n0));
  CHECK_MESSAGE(finish(n1, 120) == 0, err_of(n1));
  finish(n2, 10);
  std::string out_a = agent_test::slurp(n0.out);
  long k = resumed_step(out_a);
  CHECK_MESSAGE(k >= 20, out_a);
  CHECK_MESSAGE(out_a.find("at world size 2") != std::string::npos, out_a);
  REQUIRE(fs::exists(a.t.path / "weights-1"));
  REQUIRE(fs::exists(a.t.path / "resume-1"));

  // B: a fixed two-node job that starts from the checkpoints generation 1 of A started from
  Job b(2, 1, script("0"), extra);
  std::vector<std::string> from{"--set", "/restart/checkpoint_dir=" + (a.t.path / "resume-1").string()};
  Node m0 = b.node(0, from), m1 = b.node(1, from);
  CHECK_MESSAGE(finish(m0, 120) == 0, err_of(m0));
  CHECK_MESSAGE(finish(m1, 120) == 0, err_of(m1));
  std::string out_b = agent_test::slurp(m0.out);
  CHECK_MESSAGE(resumed_step(out_b) == k, out_b);
  auto wa = weights_of(a.t.path / "weights-1"), wb = weights_of(b.t.path / "weights-0");
  REQUIRE(wa.size() == wb.size());
  REQUIRE_FALSE(wa.empty());
  double diff = dtrain::test::relative_difference(wa, wb);
  MESSAGE("elastic shrink vs a run started at world size 2 from step ", k, ": relative difference ", diff);
  CHECK(diff <= dtrain::test::kWeightTolerance);
  CHECK(a.no_workers_left());
}

}
