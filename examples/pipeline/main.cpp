// dtrain-pipeline-example: pipeline-parallel training of a small MLP (examples/pipeline/README.md,
// dtrain-examples(7)). Each rank holds the layers of its stage (DTRAIN_PP_RANK of DTRAIN_PP_SIZE),
// passes activations forward and gradients backward to the neighbouring stages of its replica with
// send/recv, runs the step's micro-batches in the order of DTRAIN_PP_SCHEDULE, averages its stage's
// gradients over its data group (DTRAIN_DP_SIZE replicas) with one allreduce and takes an SGD step.
//
//   dtrain-pipeline-example [--lr RATE] [--layers N] [--hidden N] [--stage-work-us N] [--weights-out PREFIX]
//
// Exit status: 0 on success; 1 for an unexpected error (out of memory); 2 for bad arguments, a missing batch plan, a tensor degree above 1 or
// more stages than layers; 3 when the replicas of a stage disagree; 5 when a weights file cannot be
// written; 10 + status when a dtrain call fails.
#include <dtrain/collectives.hpp>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "schedule.hpp"
#include "stage.hpp"

namespace {

using namespace pipeline;

const char* const kProg = "dtrain-pipeline-example";
const char* const kUsage =
    "usage: dtrain-pipeline-example [--lr RATE] [--layers N] [--hidden N] [--stage-work-us N] [--weights-out PREFIX]\n"
    "  (a worker for `dtrain launch`; see dtrain-examples(7))\n";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Options {
  double lr = 0.05;
  Shape shape;
  long work_us = 0;
  std::string weights_out;
};

// The parallel layout and batch plan from the environment `dtrain launch` sets.
struct Layout {
  int rank = 0, stage = 0, stages = 1, replica = 0, replicas = 1;
  Schedule schedule = Schedule::one_f_one_b;
  Batch batch;
};

long number(const char* what, const char* text, long min) {
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || x < min)
    throw UsageError(std::string(what) + "=" + text + ": expected an integer >= " + std::to_string(min));
  return x;
}

long env_number(const char* name, long min) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0')
    throw UsageError(std::string(name) + " is not set: run this worker under `dtrain launch` with a job that has a "
                                         "batch section (examples/jobs/pipeline.json)");
  return number(name, v, min);
}

Options parse_args(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (i + 1 >= argc) throw UsageError("unknown argument or missing value: " + a);
    const char* v = argv[++i];
    if (a == "--lr") o.lr = std::atof(v);
    else if (a == "--layers") o.shape.layers = static_cast<int>(number("--layers", v, 1));
    else if (a == "--hidden") o.shape.hidden = static_cast<int>(number("--hidden", v, 1));
    else if (a == "--stage-work-us") o.work_us = number("--stage-work-us", v, 0);
    else if (a == "--weights-out") o.weights_out = v;
    else throw UsageError("unknown argument: " + a);
  }
  if (!(o.lr > 0)) throw UsageError("--lr must be > 0");
  if (o.shape.layers > 64 || o.shape.hidden > 4096) throw UsageError("--layers must be 1..64 and --hidden 1..4096");
  return o;
}

Layout read_layout(const Options& o) {
  Layout l;
  l.rank = static_cast<int>(env_number("RANK", 0));
  if (const long tp = env_number("DTRAIN_TP_SIZE", 1); tp != 1)
    throw UsageError("DTRAIN_TP_SIZE=" + std::to_string(tp) + ": this example splits the model over pipeline stages "
                     "only; set parallel.tensor to 1");
  l.stage = static_cast<int>(env_number("DTRAIN_PP_RANK", 0));
  l.stages = static_cast<int>(env_number("DTRAIN_PP_SIZE", 1));
  l.replica = static_cast<int>(env_number("DTRAIN_DP_RANK", 0));
  l.replicas = static_cast<int>(env_number("DTRAIN_DP_SIZE", 1));
  const char* sched = std::getenv("DTRAIN_PP_SCHEDULE");
  try {
    l.schedule = parse_schedule(sched != nullptr ? sched : "");
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("DTRAIN_PP_SCHEDULE: ") + e.what());
  }
  if (l.stages > o.shape.layers)
    throw UsageError(std::to_string(l.stages) + " pipeline stages but only " + std::to_string(o.shape.layers) +
                     " layers: give --layers " + std::to_string(l.stages) + " or more");
  Batch& b = l.batch;
  b.global = env_number("DTRAIN_GLOBAL_BATCH", 1);
  b.per_replica = env_number("DTRAIN_PER_REPLICA_BATCH", 1);
  b.micro = env_number("DTRAIN_MICRO_BATCHES", 1);
  b.micro_size = env_number("DTRAIN_MICRO_BATCH_SIZE", 1);
  b.iters = env_number("DTRAIN_ITERATIONS_PER_EPOCH", 1);
  b.epochs = env_number("DTRAIN_EPOCHS", 1);
  b.dataset = env_number("DTRAIN_DATASET_SIZE", 1);
  if (b.micro * b.micro_size != b.per_replica || b.per_replica * l.replicas != b.global)
    throw UsageError("the batch plan does not add up: DTRAIN_MICRO_BATCHES x DTRAIN_MICRO_BATCH_SIZE must be "
                     "DTRAIN_PER_REPLICA_BATCH, and that x DTRAIN_DP_SIZE DTRAIN_GLOBAL_BATCH");
  return l;
}

// Averages the stage's gradients (and, on the last stage, the step's loss) over the data group and
// takes the SGD step; returns the averaged loss.
double sgd_step(Stage& s, dtrain::Communicator& data, double lr, double loss, bool last) {
  std::vector<double> g = flatten_grads(s.layers());
  if (last) g.push_back(loss);
  data.allreduce(std::span<double>(g), DTRAIN_AVG);
  std::size_t k = 0;
  for (auto& l : s.layers()) {
    for (auto& w : l.w) w -= lr * g[k++];
    for (auto& w : l.b) w -= lr * g[k++];
  }
  return last ? g.back() : 0.0;
}

// Per-stage time: the seconds of the timed iterations, and of them the seconds in compute.
struct Timing {
  double wall = 0, busy = 0;
  long iterations = 0;
};

Timing train(Stage& s, dtrain::Communicator& data, const Layout& l, const Options& o, double* final_loss) {
  const Batch& b = l.batch;
  const auto plan = actions(steps(l.schedule, l.stage, l.stages, static_cast<int>(b.micro)), l.stage, l.stages);
  const bool last = l.stage == l.stages - 1, reporter = last && l.replica == 0;
  const long total = b.epochs * b.iters;
  Timing tm;
  std::chrono::steady_clock::time_point t0;
  double busy0 = 0;
  for (long e = 0, n = 0; e < b.epochs; ++e) {
    double epoch_loss = 0;
    for (long t = 0; t < b.iters; ++t, ++n) {
      if (n == (total > 1 ? 1 : 0)) {  // the first of several iterations is a warm-up
        t0 = std::chrono::steady_clock::now();
        busy0 = s.busy_s();
      }
      zero_grads(s.layers());
      const double loss = s.run(plan, b, t, l.replica);
      epoch_loss += sgd_step(s, data, o.lr, loss, last);
    }
    *final_loss = epoch_loss / static_cast<double>(b.iters);
    if (reporter) {
      std::printf("epoch %ld/%ld: loss %.9f (%ld iterations of %ld samples, %ld micro-batches of %ld per replica)\n",
                  e + 1, b.epochs, *final_loss, b.iters, b.global, b.micro, b.micro_size);
      std::fflush(stdout);
    }
  }
  tm.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  tm.busy = s.busy_s() - busy0;
  tm.iterations = total > 1 ? total - 1 : total;
  return tm;
}

// The replica's stages add their times; the last stage of replica 0 prints the figures.
void report_timing(dtrain::Communicator& pipe, const Stage& s, const Layout& l, const Timing& tm) {
  double sums[2] = {tm.busy, tm.wall}, peak[2] = {static_cast<double>(s.peak_live()), tm.wall};
  pipe.allreduce(std::span<double>(sums), DTRAIN_SUM);
  pipe.allreduce(std::span<double>(peak), DTRAIN_MAX);
  if (l.stage != l.stages - 1 || l.replica != 0) return;
  const auto m = static_cast<int>(l.batch.micro);
  std::printf("timing: %s, %d stages, %d micro-batches, %ld timed iterations: %.3f ms per iteration, bubble %.3f "
              "measured, %.3f formula (p-1)/(m+p-1); at most %d micro-batches of activations held by a stage\n",
              schedule_name(l.schedule), l.stages, m, tm.iterations, 1e3 * peak[1] / static_cast<double>(tm.iterations),
              1.0 - sums[0] / sums[1], bubble_formula(l.stages, m), static_cast<int>(peak[0]));
  std::fflush(stdout);
}

// 0 when every replica of this stage holds the same bits, 3 after a message otherwise.
int check_replicas(dtrain::Communicator& data, const Stage& s, const Layout& l) {
  std::vector<double> mine = flatten(s.layers()), hi(mine.size()), lo(mine.size());
  data.allreduce(std::span<const double>(mine), std::span<double>(hi), DTRAIN_MAX);
  data.allreduce(std::span<const double>(mine), std::span<double>(lo), DTRAIN_MIN);
  if (hi == lo) return 0;
  std::fprintf(stderr, "%s: rank %d: the %d replicas of stage %d disagree on its weights\n", kProg, l.rank, l.replicas,
               l.stage);
  return 3;
}

// PREFIX.<stage>: the stage's parameters, one %.17g per line (each layer's weights row by row, then
// its biases); 0, or 5 after a message.
int write_weights(const Stage& s, const std::string& prefix) {
  const std::string path = prefix + "." + std::to_string(s.stage());
  FILE* f = std::fopen(path.c_str(), "w");
  bool ok = f != nullptr;
  for (double w : flatten(s.layers()))
    if (ok) ok = std::fprintf(f, "%.17g\n", w) > 0;
  if (f != nullptr && std::fclose(f) != 0) ok = false;
  if (ok) return 0;
  std::fprintf(stderr, "%s: cannot write the weights to %s: %s\n", kProg, path.c_str(), std::strerror(errno));
  return 5;
}

int run(const Options& o, const Layout& l) {
  // The groups, in the same order on every rank (dtrain_comm_init_group_from_env is collective).
  auto pipe = dtrain::Communicator::group(DTRAIN_GROUP_PIPELINE);
  auto data = dtrain::Communicator::group(DTRAIN_GROUP_DATA);
  Stage s(pipe, o.shape, pipe.rank(), pipe.size(), o.work_us);
  const auto [first, last] = stage_layers(o.shape.layers, l.stages, l.stage);
  std::printf("rank %d: stage %d/%d (layers %d..%d of %d), replica %d/%d, %s schedule, %ld micro-batches of %ld\n",
              l.rank, l.stage, l.stages, first, last - 1, o.shape.layers, l.replica, l.replicas,
              schedule_name(l.schedule), l.batch.micro, l.batch.micro_size);
  std::fflush(stdout);
  double loss = 0;
  const Timing tm = train(s, data, l, o, &loss);
  report_timing(pipe, s, l, tm);
  if (int rc = check_replicas(data, s, l); rc != 0) return rc;
  if (l.replica == 0 && !o.weights_out.empty())
    if (int rc = write_weights(s, o.weights_out); rc != 0) return rc;
  if (l.stage == l.stages - 1 && l.replica == 0) {
    std::printf("done: %ld epochs, final loss %.9f; the weights of every stage identical on its %d replicas\n",
                l.batch.epochs, loss, l.replicas);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse_args(argc, argv);
    return run(o, read_layout(o));
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: %s\n%s", kProg, e.what(), kUsage);
    return 2;
  } catch (const dtrain::coll_error& e) {
    const char* rank = std::getenv("RANK");
    std::fprintf(stderr, "%s: rank %s: %s\n", kProg, rank != nullptr ? rank : "?", e.what());
    return 10 + static_cast<int>(e.status());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", kProg, e.what());
    return 1;
  }
}
