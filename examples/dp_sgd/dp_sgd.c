/* dtrain-demo-worker: data-parallel SGD on a synthetic linear regression, in C against the C ABI.
 * The built-in demo job (`dtrain launch` with no job file) runs it; any job with a batch section can:
 *
 *   { "command": ["dtrain-demo-worker"], "batch": { "per_replica": 16, "micro_batches": 2, ... } }
 *
 *   dtrain-demo-worker [--lr RATE] [--dim N]
 *
 * Data: sample i (0 <= i < DTRAIN_DATASET_SIZE) has features x[j] uniform in [-1, 1) and a target
 * y = w_true . x + b_true + noise, all generated from i alone, so every rank sees the same dataset
 * without reading files. Iteration t of an epoch takes the global batch of samples t*G .. t*G+G-1
 * (mod the dataset size); rank r takes its shard r*P .. r*P+P-1 of it, in DTRAIN_MICRO_BATCHES
 * micro-batches of DTRAIN_MICRO_BATCH_SIZE whose gradients are accumulated, then the gradients (and
 * the loss) are averaged over the ranks with one float32 DTRAIN_AVG allreduce and every rank takes
 * the same SGD step. Rank 0 draws the initial weights and broadcasts them; at the end every rank
 * checks, with allreduce MAX and MIN, that all replicas hold bit-identical weights.
 *
 * Output: one start line per rank ("rank R/W on node N: shard ..."), then rank 0 prints one line per
 * epoch (mean loss) and a final line. Exit status: 0 on success; 2 for bad arguments or a missing
 * batch plan in the environment; 3 when the replicas disagree; 4 when the model did not learn;
 * 10 + status when a dtrain call fails (the message carries dtrain_last_error()). */
#include <dtrain/collectives.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DIM 64

static const char* prog = "dtrain-demo-worker";

static int check(dtrain_status_t st, const char* what, int rank) {
  if (st == DTRAIN_SUCCESS) return 0;
  fprintf(stderr, "%s: rank %d: %s failed: %s (%d): %s\n", prog, rank, what, dtrain_status_string(st), (int)st,
          dtrain_last_error());
  fflush(stderr);
  return 10 + (int)st;
}

#define CALL(expr, what)                   \
  do {                                     \
    int rc_ = check((expr), (what), rank); \
    if (rc_ != 0) {                        \
      dtrain_comm_destroy(comm);           \
      return rc_;                          \
    }                                      \
  } while (0)

/* A positive integer from the environment `dtrain launch` sets; 0 (after a message) when missing. */
static long env_long(const char* name) {
  const char* v = getenv(name);
  if (v == NULL || *v == '\0') {
    fprintf(stderr,
            "%s: %s is not set: run this worker under `dtrain launch` with a job that has a batch section "
            "(the built-in demo job has one)\n",
            prog, name);
    return 0;
  }
  char* end = NULL;
  long x = strtol(v, &end, 10);
  if (*end != '\0' || x <= 0) {
    fprintf(stderr, "%s: %s=%s: expected a positive integer\n", prog, name, v);
    return 0;
  }
  return x;
}

/* splitmix64: the whole dataset is a pure function of (sample, feature). */
static uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static double uniform(uint64_t key) { return (double)(mix(key) >> 11) * (2.0 / 9007199254740992.0) - 1.0; }

static double true_weight(int j) { return 0.5 * (double)(j + 1) * ((j % 2) ? -1.0 : 1.0) / (double)MAX_DIM * 8.0; }
static const double true_bias = 0.25;

/* Sample i: features into x[0..dim), returns the target. */
static double sample(long i, int dim, double* x) {
  double y = true_bias;
  for (int j = 0; j < dim; ++j) {
    x[j] = uniform((uint64_t)i * 1315423911ULL + (uint64_t)j);
    y += true_weight(j) * x[j];
  }
  return y + 0.01 * uniform((uint64_t)i * 2654435761ULL + 0xfeedULL);
}

int main(int argc, char** argv) {
  double lr = 0.2;
  int dim = 8;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--lr") && i + 1 < argc) lr = atof(argv[++i]);
    else if (!strcmp(argv[i], "--dim") && i + 1 < argc) dim = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [--lr RATE] [--dim N]   (N in 1..%d)\n", prog, MAX_DIM);
      return 2;
    }
  }
  if (dim < 1 || dim > MAX_DIM || !(lr > 0)) {
    fprintf(stderr, "%s: --dim must be 1..%d and --lr > 0\n", prog, MAX_DIM);
    return 2;
  }
  const long global = env_long("DTRAIN_GLOBAL_BATCH"), per_replica = env_long("DTRAIN_PER_REPLICA_BATCH");
  const long micro = env_long("DTRAIN_MICRO_BATCHES"), micro_size = env_long("DTRAIN_MICRO_BATCH_SIZE");
  const long iters = env_long("DTRAIN_ITERATIONS_PER_EPOCH"), epochs = env_long("DTRAIN_EPOCHS");
  const long dataset = env_long("DTRAIN_DATASET_SIZE");
  if (!global || !per_replica || !micro || !micro_size || !iters || !epochs || !dataset) return 2;
  if (micro * micro_size != per_replica) {
    fprintf(stderr, "%s: DTRAIN_MICRO_BATCHES (%ld) x DTRAIN_MICRO_BATCH_SIZE (%ld) != DTRAIN_PER_REPLICA_BATCH (%ld)\n",
            prog, micro, micro_size, per_replica);
    return 2;
  }
  const char* node = getenv("DTRAIN_NODE_RANK");
  if (node == NULL || *node == '\0') node = getenv("GROUP_RANK");
  if (node == NULL || *node == '\0') node = "?";

  dtrain_comm_t comm = NULL;
  int rank = -1, world = 0;
  int rc = check(dtrain_comm_init_from_env(&comm), "init", rank);
  if (rc != 0) return rc;
  CALL(dtrain_comm_rank(comm, &rank), "rank");
  CALL(dtrain_comm_size(comm, &world), "size");
  if (per_replica * world != global) {
    fprintf(stderr, "%s: rank %d: DTRAIN_PER_REPLICA_BATCH (%ld) x world size (%d) != DTRAIN_GLOBAL_BATCH (%ld)\n",
            prog, rank, per_replica, world, global);
    dtrain_comm_destroy(comm);
    return 2;
  }
  const long first = (long)rank * per_replica;
  printf("rank %d/%d on node %s: shard [%ld, %ld) of each global batch of %ld, %ld micro-batches of %ld\n", rank,
         world, node, first, first + per_replica, global, micro, micro_size);
  fflush(stdout);

  /* Parameters: dim weights then the bias. Every rank draws its own start (rank-dependent on purpose);
   * the broadcast from rank 0 is what makes the replicas equal. */
  const int np = dim + 1;
  float w[MAX_DIM + 1];
  float grad[MAX_DIM + 2]; /* gradient, then the loss in the last slot: one allreduce for both */
  double x[MAX_DIM];
  for (int j = 0; j < np; ++j) w[j] = (float)uniform(0xabcdef00ULL + (uint64_t)rank * 1000003ULL + (uint64_t)j);
  CALL(dtrain_broadcast(comm, w, w, (size_t)np, DTRAIN_FLOAT32, 0, NULL), "broadcast of the initial weights");

  double loss = 0;
  for (long e = 0; e < epochs; ++e) {
    double epoch_loss = 0;
    for (long t = 0; t < iters; ++t) {
      double acc[MAX_DIM + 2] = {0};
      for (long u = 0; u < micro; ++u) {
        /* One micro-batch: its mean gradient, accumulated into acc with weight 1/micro. */
        double g[MAX_DIM + 2] = {0};
        for (long k = 0; k < micro_size; ++k) {
          const long i = (t * global + first + u * micro_size + k) % dataset;
          const double y = sample(i, dim, x);
          double pred = w[dim];
          for (int j = 0; j < dim; ++j) pred += (double)w[j] * x[j];
          const double err = pred - y;
          for (int j = 0; j < dim; ++j) g[j] += err * x[j];
          g[dim] += err;
          g[np] += 0.5 * err * err;
        }
        for (int j = 0; j <= np; ++j) acc[j] += g[j] / (double)micro_size / (double)micro;
      }
      for (int j = 0; j <= np; ++j) grad[j] = (float)acc[j];
      CALL(dtrain_allreduce(comm, grad, grad, (size_t)np + 1, DTRAIN_FLOAT32, DTRAIN_AVG, NULL), "gradient allreduce");
      for (int j = 0; j < np; ++j) w[j] -= (float)lr * grad[j];
      epoch_loss += (double)grad[np];
    }
    loss = epoch_loss / (double)iters;
    if (rank == 0) {
      printf("epoch %ld/%ld: loss %.6f (%ld iterations of %ld samples)\n", e + 1, epochs, loss, iters, global);
      fflush(stdout);
    }
  }

  /* Every replica must hold the same bits: MAX and MIN of (weights, checksum) over the ranks agree. */
  double mine[MAX_DIM + 2], hi[MAX_DIM + 2], lo[MAX_DIM + 2];
  double checksum = 0, werr = 0;
  for (int j = 0; j < np; ++j) {
    mine[j] = (double)w[j];
    checksum += (double)w[j] * (double)(j + 1);
    const double want = j < dim ? true_weight(j) : true_bias;
    werr = fmax(werr, fabs((double)w[j] - want));
  }
  mine[np] = checksum;
  CALL(dtrain_allreduce(comm, mine, hi, (size_t)np + 1, DTRAIN_FLOAT64, DTRAIN_MAX, NULL), "weight check (max)");
  CALL(dtrain_allreduce(comm, mine, lo, (size_t)np + 1, DTRAIN_FLOAT64, DTRAIN_MIN, NULL), "weight check (min)");
  int same = 1;
  for (int j = 0; j <= np; ++j) same = same && hi[j] == lo[j];
  if (!same) {
    fprintf(stderr, "%s: rank %d: the replicas disagree: weight checksum ranges over [%.17g, %.17g]\n", prog, rank,
            lo[np], hi[np]);
    dtrain_comm_destroy(comm);
    return 3;
  }
  if (rank == 0) {
    printf("done: %ld epochs, final loss %.6f, max |w - w_true| %.4f; weights identical on all %d ranks "
           "(checksum %.9g)\n",
           epochs, loss, werr, world, checksum);
    fflush(stdout);
  }
  rc = check(dtrain_comm_destroy(comm), "destroy", rank);
  if (rc != 0) return rc;
  if (werr > 0.05) {
    fprintf(stderr, "%s: rank %d: the model did not converge (max weight error %.4f > 0.05); try a smaller --lr\n",
            prog, rank, werr);
    return 4;
  }
  return 0;
}
