// Data-parallel SGD equals one replica, through `dtrain launch` (real processes, shm and TCP): the C
// demo worker (examples/dp_sgd, --float64) and examples/python_sgd.py train the same float64 weights
// with 1, 2 and 4 replicas at one global batch, and with 1 or 4 micro-batches; a different global
// batch trains different weights, so the comparison can fail.
//
// Equal up to rounding, not bit for bit: each step's gradient is the mean over the global batch in
// every run, but summed in a different order (per micro-batch, per replica, then the allreduce's
// order, which depends on the engine and the world size; dtrain-collectives(3)). Each reordering
// changes a sum by a few ulps (~1e-16 relative); SGD on these convex losses does not amplify that, so
// the runs agree to about 1e-15. The bar is the stated 1e-9 relative (max |a - b| / max |b|); the
// observed figure is printed. A different global batch changes the weights by ~1e-2.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "../cli/run_binary.hpp"
#include "weights.hpp"

namespace {

using dtrain::test::TempDir;

struct Worker {
  std::string name;
  std::vector<std::string> command;  // without --weights-out
  std::map<std::string, std::string> env;
};

Worker c_worker() { return {"dp_sgd", {DEMO_WORKER, "--float64"}, {}}; }

Worker python_worker() {
  REQUIRE_MESSAGE(std::string(PYTHON_EXECUTABLE) != "", "no Python interpreter with numpy was found at configure time");
  Worker w{"python_sgd", {PYTHON_EXECUTABLE, DTRAIN_SOURCE_DIR "/examples/python_sgd.py"},
           {{"PYTHONPATH", DTRAIN_BINARY_DIR "/python"}}};
  // Sanitizer builds preload the runtime into the interpreter (tests/CMakeLists.txt): pass it on.
  for (const char* name : {"LD_PRELOAD", "ASAN_OPTIONS"})
    if (const char* v = std::getenv(name)) w.env[name] = v;
  return w;
}

struct Setup {
  int replicas;
  int micro_batches;
  int global;
  const char* transport;  // DTRAIN_TRANSPORT
};

std::string quoted_list(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "\"" : ", \"") + w + "\"";
  return out;
}

// The final weights rank 0 wrote after training under `dtrain launch` with this setup.
std::vector<double> train(const Worker& w, const Setup& s) {
  TempDir dir;
  const std::string weights = (dir.path / "weights.txt").string();
  auto command = w.command;
  command.insert(command.end(), {"--weights-out", weights});
  const std::string spec = dir.write(
      "job.json", fmt::format(R"({{ "version": 1, "name": "sgd-equivalence", "command": [{}],
  "cluster": {{ "instances": 1, "procs_per_instance": {} }},
  "batch": {{ "global": {}, "micro_batches": {}, "dataset_size": 2048, "epochs": 3 }} }})",
                              quoted_list(command), s.replicas, s.global, s.micro_batches));
  auto env = dtrain::test::base_env();
  env.insert(w.env.begin(), w.env.end());
  env["DTRAIN_TRANSPORT"] = s.transport;
  env["DTRAIN_COLL_TIMEOUT_S"] = "60";
  env["DTRAIN_LOG"] = "info:coll";  // each rank names its engine
  const auto r = dtrain::test::run({DTRAIN_BIN, "launch", spec}, env, 180);
  INFO(w.name << " with " << s.replicas << " replicas, " << s.micro_batches << " micro-batches, global batch "
              << s.global << ", transport " << std::string(s.transport) << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err);
  REQUIRE(r.status == 0);
  REQUIRE(r.out.find(fmt::format("weights identical on all {} ranks", s.replicas)) != std::string::npos);
  const std::string engine = s.replicas == 1 ? "self engine" : std::string(s.transport) == "tcp" ? "tcp engine" : "shm engine";
  CHECK((r.out + r.err).find(fmt::format("rank 0/{} (world rank 0, local 0/{}, keys coll/1/): {}", s.replicas, s.replicas,
                                         engine)) != std::string::npos);
  std::vector<double> out;
  std::ifstream in(weights);
  for (std::string line; std::getline(in, line);) out.push_back(std::stod(line));
  REQUIRE(out.size() == 9);  // 8 weights and the bias (both workers' default --dim 8)
  return out;
}

using dtrain::test::relative_difference;
constexpr double kTolerance = dtrain::test::kWeightTolerance;

void same_weights_for_any_replica_count(const Worker& w) {
  const auto one = train(w, {1, 1, 32, "auto"});
  for (const char* transport : {"auto", "tcp"})
    for (int replicas : {2, 4}) {
      const double d = relative_difference(train(w, {replicas, 1, 32, transport}), one);
      MESSAGE(w.name << ": " << replicas << " replicas (" << std::string(transport) << ") vs 1: relative difference " << d);
      CHECK(d < kTolerance);
    }
}

void same_weights_for_any_micro_batch_count(const Worker& w) {
  const auto one = train(w, {2, 1, 32, "auto"});
  for (const Setup& s : {Setup{2, 4, 32, "auto"}, Setup{4, 4, 32, "tcp"}, Setup{1, 4, 32, "auto"}}) {
    const double d = relative_difference(train(w, s), one);
    MESSAGE(w.name << ": " << s.replicas << " replicas x 4 micro-batches (" << std::string(s.transport)
                   << ") vs 2 replicas x 1: relative difference " << d);
    CHECK(d < kTolerance);
  }
}

void different_global_batch_differs(const Worker& w) {
  const double d = relative_difference(train(w, {2, 1, 64, "auto"}), train(w, {2, 1, 32, "auto"}));
  MESSAGE(w.name << ": global batch 64 vs 32: relative difference " << d);
  CHECK(d > 1e-4);
}

}  // namespace

TEST_SUITE("examples::sgd_equivalence") {
  TEST_CASE("dp_sgd: 1, 2 and 4 replicas at one global batch train the same weights, on shm and tcp") {
    same_weights_for_any_replica_count(c_worker());
  }
  TEST_CASE("dp_sgd: 1 and 4 micro-batches train the same weights") { same_weights_for_any_micro_batch_count(c_worker()); }
  TEST_CASE("dp_sgd: a different global batch trains different weights") { different_global_batch_differs(c_worker()); }

  TEST_CASE("python_sgd: 1, 2 and 4 replicas at one global batch train the same weights, on shm and tcp") {
    same_weights_for_any_replica_count(python_worker());
  }
  TEST_CASE("python_sgd: 1 and 4 micro-batches train the same weights") {
    same_weights_for_any_micro_batch_count(python_worker());
  }
  TEST_CASE("python_sgd: a different global batch trains different weights") {
    different_global_batch_differs(python_worker());
  }
}
