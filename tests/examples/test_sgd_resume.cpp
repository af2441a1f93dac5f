// Restarts continue where they left off, through `dtrain launch` (real processes): the demo worker
// (examples/dp_sgd, --float64) saves a checkpoint after every step in DTRAIN_CHECKPOINT_DIR; a job
// whose generation 0 fails after step K (--fail-at-step) resumes in generation 1 from step K's
// checkpoint and ends with the weights of an uninterrupted run.
//
// The bar is 1e-12 relative (max |a - b| / max |b|) at one world size: the checkpoint holds the
// parameters bit for bit (%a) and the resumed steps see the same samples summed in the same order,
// so the runs agree exactly in practice; the observed figure is printed. Resuming at another world
// size reorders each step's sums (tests/examples/test_sgd_equivalence.cpp), so that case has the
// equivalence tests' 1e-9. The comparison can fail: a resumed run with another learning rate, or
// from a checkpoint whose weights were altered, ends elsewhere.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "../cli/run_binary.hpp"
#include "weights.hpp"

namespace {

namespace fs = std::filesystem;
using dtrain::test::relative_difference;
using dtrain::test::TempDir;

constexpr double kResumeTolerance = 1e-12;
constexpr int kFailStep = 100;  // of 3 epochs x 64 steps: inside the second epoch

struct Launch {
  int procs = 2;
  int max_restarts = 1;
  std::optional<std::string> checkpoint_dir;  // restart.checkpoint_dir; unset: the run folder's
  std::vector<std::string> args;              // more worker arguments
};

struct Outcome {
  dtrain::test::Result r;
  std::vector<double> weights;
};

std::string quoted_list(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "\"" : ", \"") + w + "\"";
  return out;
}

// One `dtrain launch` of the demo worker (float64, checkpoint every step, global batch 32) in dir.
Outcome launch(const TempDir& dir, const Launch& l, const std::string& name = "job") {
  const std::string weights = (dir.path / (name + ".weights")).string();
  std::vector<std::string> command = {DEMO_WORKER, "--float64", "--checkpoint-every", "1", "--weights-out", weights};
  command.insert(command.end(), l.args.begin(), l.args.end());
  const std::string restart =
      fmt::format(R"({{ "max_restarts": {}{} }})", l.max_restarts,
                  l.checkpoint_dir ? fmt::format(R"(, "checkpoint_dir": "{}")", *l.checkpoint_dir) : std::string());
  const std::string spec = dir.write(
      name + ".json", fmt::format(R"({{ "version": 1, "name": "sgd-resume", "command": [{}], "workdir": "{}",
  "cluster": {{ "instances": 1, "procs_per_instance": {} }}, "restart": {},
  "batch": {{ "global": 32, "dataset_size": 2048, "epochs": 3 }} }})",
                                  quoted_list(command), dir.path.string(), l.procs, restart));
  auto env = dtrain::test::base_env();
  env["DTRAIN_COLL_TIMEOUT_S"] = "60";
  Outcome o{dtrain::test::run({DTRAIN_BIN, "launch", spec}, env, 180), {}};
  std::ifstream in(weights);
  for (std::string line; std::getline(in, line);) o.weights.push_back(std::stod(line));
  return o;
}

std::string shown(const Outcome& o) { return "stdout:\n" + o.r.out + "\nstderr:\n" + o.r.err; }

// The weights of an uninterrupted run, with a check that it was one: the same run for every case,
// launched once (in a folder of its own) by the first case that asks.
const std::vector<double>& uninterrupted() {
  static const TempDir dir;
  static const std::vector<double> weights = [] {
    const Outcome a = launch(dir, {}, "uninterrupted");
    INFO(shown(a));
    REQUIRE(a.r.status == 0);
    CHECK(a.r.out.find("resumed") == std::string::npos);
    REQUIRE(a.weights.size() == 9);
    return a.weights;
  }();
  return weights;
}

// Generation 0 of a launch in dir fails after step kFailStep and nothing restarts it: status 7, and
// the checkpoint folder holds the two newest steps.
void fail_once(const TempDir& dir, const std::string& ckpt, int procs = 2) {
  const Outcome f = launch(dir, {procs, 0, ckpt, {"--fail-at-step", std::to_string(kFailStep)}}, "failing");
  INFO(shown(f));
  REQUIRE(f.r.status == 7);
  CHECK(f.r.err.find(fmt::format("failing after step {} as asked", kFailStep)) != std::string::npos);
  CHECK(fs::exists(dir.path / ckpt / fmt::format("step-{}.ckpt", kFailStep)));
  CHECK(fs::exists(dir.path / ckpt / fmt::format("step-{}.ckpt", kFailStep - 1)));
  CHECK(!fs::exists(dir.path / ckpt / fmt::format("step-{}.ckpt", kFailStep - 2)));
}

// A launch that resumes from ckpt (step kFailStep) with more arguments; its weights.
std::vector<double> resumed(const TempDir& dir, const std::string& ckpt, const std::vector<std::string>& args,
                            int procs = 2) {
  const Outcome b = launch(dir, {procs, 0, ckpt, args}, "resumed");
  INFO(shown(b));
  REQUIRE(b.r.status == 0);
  CHECK(b.r.out.find(fmt::format("resumed from step {} ({}/step-{}.ckpt) at world size {}", kFailStep,
                                 (dir.path / ckpt).string(), kFailStep, procs)) != std::string::npos);
  REQUIRE(b.weights.size() == 9);
  return b.weights;
}

// Adds 0.01 to the bias (the last parameter line) of a checkpoint file.
void alter_bias(const fs::path& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  REQUIRE(lines.size() == 4 + 9);
  lines.back() = fmt::format("{:a}", std::stod(lines.back()) + 0.01);
  std::ofstream out(file, std::ios::trunc);
  for (const auto& l : lines) out << l << '\n';
}

}  // namespace

TEST_SUITE("examples::sgd_resume") {
  TEST_CASE("dp_sgd: generation 1 resumes from generation 0's last checkpoint and trains the uninterrupted weights") {
    TempDir dir;
    const auto& a = uninterrupted();
    const Outcome b = launch(dir, {2, 1, std::nullopt, {"--fail-at-step", std::to_string(kFailStep)}}, "restarted");
    INFO(shown(b));
    REQUIRE(b.r.status == 0);
    CHECK(b.r.err.find(fmt::format("failing after step {} as asked", kFailStep)) != std::string::npos);
    CHECK(b.r.out.find(fmt::format("resumed from step {} (", kFailStep)) != std::string::npos);
    // the launch's own checkpoint folder (no log folder: $TMPDIR/dtrain-RUN-checkpoint-XXXXXX)
    CHECK(b.r.out.find("-checkpoint-") != std::string::npos);
    CHECK(b.r.out.find("/step-" + std::to_string(kFailStep) + ".ckpt) at world size 2") != std::string::npos);
    REQUIRE(b.weights.size() == 9);
    const double d = relative_difference(b.weights, a);
    MESSAGE("restarted after step " << kFailStep << " vs uninterrupted: relative difference " << d);
    CHECK(d < kResumeTolerance);
  }

  TEST_CASE("dp_sgd: restart.checkpoint_dir carries a job across launches; another lr or altered weights differ") {
    TempDir dir;
    const auto& a = uninterrupted();
    fail_once(dir, "ckpt/run");
    fs::copy(dir.path / "ckpt/run", dir.path / "other-lr");
    fs::copy(dir.path / "ckpt/run", dir.path / "altered");
    const double same = relative_difference(resumed(dir, "ckpt/run", {}), a);
    MESSAGE("resumed in a second launch vs uninterrupted: relative difference " << same);
    CHECK(same < kResumeTolerance);
    const double lr = relative_difference(resumed(dir, "other-lr", {"--lr", "0.1"}), a);
    MESSAGE("resumed with --lr 0.1 vs uninterrupted at 0.2: relative difference " << lr);
    CHECK(lr > 1e-9);
    alter_bias(dir.path / "altered" / fmt::format("step-{}.ckpt", kFailStep));
    const double altered = relative_difference(resumed(dir, "altered", {}), a);
    MESSAGE("resumed from a checkpoint with the bias moved by 0.01 vs uninterrupted: relative difference " << altered);
    CHECK(altered > 1e-9);
  }

  TEST_CASE("dp_sgd: a job resumed at another world size with the same global batch trains the same weights") {
    TempDir dir;
    const auto& a = uninterrupted();
    fail_once(dir, "ckpt", 2);
    const double d = relative_difference(resumed(dir, "ckpt", {}, 4), a);
    MESSAGE("failed at world size 2, resumed at 4 vs uninterrupted at 2: relative difference " << d);
    CHECK(d < dtrain::test::kWeightTolerance);
  }

  TEST_CASE("dp_sgd: an unusable checkpoint stops the job with status 6 and names the file") {
    TempDir dir;
    fs::create_directories(dir.path / "ckpt");
    dir.write("ckpt/step-5.ckpt", "dtrain-demo-worker checkpoint 1\nstep 5\ndim 4\nfloat64 1\n0x1p+0\n0x1p+0\n0x1p+0\n0x1p+0\n0x1p+0\n");
    const Outcome wrong_dim = launch(dir, {2, 0, "ckpt", {}}, "wrong-dim");
    CHECK(wrong_dim.r.status == 6);
    CHECK(wrong_dim.r.err.find((dir.path / "ckpt/step-5.ckpt").string() + " was written with --dim 4 --float64, this run has --dim 8") !=
          std::string::npos);
    dir.write("ckpt/step-6.ckpt", "dtrain-demo-worker checkpoint 1\nstep 6\ndim 8\nfloat64 1\n0x1p+0\nnot a number\n");
    const Outcome garbage = launch(dir, {2, 0, "ckpt", {}}, "garbage");
    INFO(shown(garbage));
    CHECK(garbage.r.status == 6);
    CHECK(garbage.r.err.find("a bad or missing parameter line in " + (dir.path / "ckpt/step-6.ckpt").string()) != std::string::npos);
  }

  TEST_CASE("a checkpoint_dir that cannot be created ends the launch with status 2 before any worker starts") {
    TempDir dir;
    dir.write("blocker", "a file where the folder should go\n");
    const Outcome o = launch(dir, {2, 0, "blocker/ckpt", {}}, "blocked");
    INFO(shown(o));
    CHECK(o.r.status == 2);
    CHECK(o.r.err.find("cannot create the checkpoint folder '" + (dir.path / "blocker/ckpt").string() + "'") !=
          std::string::npos);
    CHECK(o.r.err.find("restart.checkpoint_dir") != std::string::npos);
    CHECK(o.r.out.find("rank 0/2") == std::string::npos);  // no worker ran
  }
}
