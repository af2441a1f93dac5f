/* dtrain-demo-worker: data-parallel SGD on a synthetic linear regression, in C against the C ABI.
 * The built-in demo job (`dtrain launch` with no job file) runs it; any job with a batch section can:
 *
 *   { "command": ["dtrain-demo-worker"], "batch": { "per_replica": 16, "micro_batches": 2, ... } }
 *
 *   dtrain-demo-worker [--lr RATE] [--dim N] [--float64] [--weights-out FILE] [--checkpoint-every N]
 *                      [--fail-at-step K [--fail-rank R]] [--step-sleep-ms MS]
 *
 * Data: sample i (0 <= i < DTRAIN_DATASET_SIZE) has features x[j] uniform in [-1, 1) and a target
 * y = w_true . x + b_true + noise, all generated from i alone, so every rank sees the same dataset
 * without reading files. Iteration t of an epoch takes the global batch of samples t*G .. t*G+G-1
 * (mod the dataset size); rank r takes its shard r*P .. r*P+P-1 of it, in DTRAIN_MICRO_BATCHES
 * micro-batches of DTRAIN_MICRO_BATCH_SIZE whose gradients are accumulated, then the gradients (and
 * the loss) are averaged over the ranks with one DTRAIN_AVG allreduce and every rank takes the same
 * SGD step. Rank 0 draws the initial weights and broadcasts them; at the end every rank checks, with
 * allreduce MAX and MIN, that all replicas hold bit-identical weights.
 *
 * The weights and the gradient allreduce are float32 unless --float64 is given (then float64
 * throughout: 1, 2 or 4 replicas at one global batch then agree to rounding, which the equivalence
 * tests check). --weights-out FILE: rank 0 writes the final weights there, one %.17g per line (the
 * DIM weights, then the bias).
 *
 * Checkpoints (the worker's side of restarts, dtrain-launch(1) "Restarts and checkpoints"): with
 * --checkpoint-every N, rank 0 writes DTRAIN_CHECKPOINT_DIR/step-<k>.ckpt after every N-th SGD step
 * (k = steps completed since the start of training, across epochs; checkpoint.h has the format, exact
 * to the bit) and keeps the two newest it wrote. At the start, when DTRAIN_CHECKPOINT_DIR holds
 * step-*.ckpt files, rank 0 loads the newest and broadcasts its k and parameters in place of the
 * initial weights, prints "resumed from step k (<file>) at world size W", and training goes on with
 * step k+1. Step s's global batch depends on s and the global batch size only, so a job resumed at
 * another world size (same global batch) trains on the same samples. Only rank 0 reads the folder.
 * Failure injection for tests: --fail-at-step K makes rank R (--fail-rank, default 1; rank 0 when
 * the world has no rank R) exit 7 right after step K (and its checkpoint: every rank waits for it
 * in a barrier first), in restart generation 0 only (DTRAIN_GENERATION); --step-sleep-ms MS sleeps
 * after each step.
 *
 * Output: one start line per rank ("rank R/W on node N: shard ..."), then rank 0 prints one line per
 * epoch (mean loss) and a final line. Exit status: 0 on success; 2 for bad arguments or a missing
 * batch plan in the environment; 3 when the replicas disagree; 4 when the model did not learn;
 * 5 when the weights file cannot be written; 6 when a checkpoint cannot be written or read (or was
 * written with another --dim or precision); 7 for the injected failure of --fail-at-step; 10 + status
 * when a dtrain call fails (the message carries dtrain_last_error()). */
#define _POSIX_C_SOURCE 200809L
#include <dtrain/collectives.h>

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "checkpoint.h"

#define MAX_DIM 64

static const char* prog = "dtrain-demo-worker";

typedef struct {
  double lr;
  int dim;
  int f64;                 /* --float64 */
  const char* weights_out; /* --weights-out, or NULL */
  long ckpt_every;         /* --checkpoint-every; 0: never */
  long fail_at;            /* --fail-at-step; 0: never */
  int fail_rank;           /* --fail-rank */
  long sleep_ms;           /* --step-sleep-ms */
  const char* ckpt_dir;    /* DTRAIN_CHECKPOINT_DIR, or NULL */
  int generation;          /* DTRAIN_GENERATION (0 when unset) */
} options_t;

/* The batch plan from the environment `dtrain launch` sets. */
typedef struct {
  long global, per_replica, micro, micro_size, iters, epochs, dataset;
} batch_t;

/* The communicator, the model and its float32 shadow for the wire. Parameters: dim weights then the
 * bias; in float32 mode w[] holds float values only and every step is computed in float. */
typedef struct {
  dtrain_comm_t comm;
  int rank, world;
  int dim, np;
  int f64;
  double w[MAX_DIM + 1];
} model_t;

static int check(dtrain_status_t st, const char* what, int rank) {
  if (st == DTRAIN_SUCCESS) return 0;
  fprintf(stderr, "%s: rank %d: %s failed: %s (%d): %s\n", prog, rank, what, dtrain_status_string(st), (int)st,
          dtrain_last_error());
  fflush(stderr);
  return 10 + (int)st;
}

#define CALL(m, expr, what)                   \
  do {                                        \
    int rc_ = check((expr), (what), (m)->rank); \
    if (rc_ != 0) return rc_;                 \
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

static int usage(void) {
  fprintf(stderr,
          "usage: %s [--lr RATE] [--dim N] [--float64] [--weights-out FILE] [--checkpoint-every N]\n"
          "       [--fail-at-step K [--fail-rank R]] [--step-sleep-ms MS]   (N in 1..%d)\n",
          prog, MAX_DIM);
  return 2;
}

/* A whole number >= 0 into *out; 0, or -1 when text is not one. */
static int count_arg(const char* text, long* out) {
  char* end = NULL;
  errno = 0;
  *out = strtol(text, &end, 10);
  return (errno != 0 || end == text || *end != '\0' || *out < 0) ? -1 : 0;
}

/* The options from the environment: DTRAIN_CHECKPOINT_DIR and DTRAIN_GENERATION. */
static void read_env_options(options_t* o) {
  const char* dir = getenv("DTRAIN_CHECKPOINT_DIR");
  o->ckpt_dir = dir != NULL && *dir != '\0' ? dir : NULL;
  const char* gen = getenv("DTRAIN_GENERATION");
  o->generation = gen != NULL ? atoi(gen) : 0;
}

/* 0, or the exit status for bad arguments. */
static int parse_args(int argc, char** argv, options_t* o) {
  *o = (options_t){.lr = 0.2, .dim = 8, .fail_rank = 1};
  long rank = 1;
  int bad = 0;
  for (int i = 1; i < argc && !bad; ++i) {
    const int more = i + 1 < argc;
    if (!strcmp(argv[i], "--lr") && more) o->lr = atof(argv[++i]);
    else if (!strcmp(argv[i], "--dim") && more) o->dim = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--float64")) o->f64 = 1;
    else if (!strcmp(argv[i], "--weights-out") && more) o->weights_out = argv[++i];
    else if (!strcmp(argv[i], "--checkpoint-every") && more) bad = count_arg(argv[++i], &o->ckpt_every);
    else if (!strcmp(argv[i], "--fail-at-step") && more) bad = count_arg(argv[++i], &o->fail_at);
    else if (!strcmp(argv[i], "--fail-rank") && more) bad = count_arg(argv[++i], &rank);
    else if (!strcmp(argv[i], "--step-sleep-ms") && more) bad = count_arg(argv[++i], &o->sleep_ms);
    else return usage();
  }
  o->fail_rank = rank > 1000000 ? 1000000 : (int)rank;
  read_env_options(o);
  if (bad || o->dim < 1 || o->dim > MAX_DIM || !(o->lr > 0)) {
    fprintf(stderr, "%s: --dim must be 1..%d, --lr > 0, and --checkpoint-every, --fail-at-step, --fail-rank and "
            "--step-sleep-ms whole numbers >= 0\n", prog, MAX_DIM);
    return 2;
  }
  if (o->ckpt_every > 0 && o->ckpt_dir == NULL) {
    fprintf(stderr, "%s: --checkpoint-every needs DTRAIN_CHECKPOINT_DIR (dtrain launch sets it; see restart.checkpoint_dir "
            "in dtrain-job(5))\n", prog);
    return 2;
  }
  return 0;
}

/* 0, or 2 after a message when a variable is missing or the sizes do not fit together. */
static int read_batch(batch_t* b) {
  b->global = env_long("DTRAIN_GLOBAL_BATCH");
  b->per_replica = env_long("DTRAIN_PER_REPLICA_BATCH");
  b->micro = env_long("DTRAIN_MICRO_BATCHES");
  b->micro_size = env_long("DTRAIN_MICRO_BATCH_SIZE");
  b->iters = env_long("DTRAIN_ITERATIONS_PER_EPOCH");
  b->epochs = env_long("DTRAIN_EPOCHS");
  b->dataset = env_long("DTRAIN_DATASET_SIZE");
  if (!b->global || !b->per_replica || !b->micro || !b->micro_size || !b->iters || !b->epochs || !b->dataset) return 2;
  if (b->micro * b->micro_size != b->per_replica) {
    fprintf(stderr, "%s: DTRAIN_MICRO_BATCHES (%ld) x DTRAIN_MICRO_BATCH_SIZE (%ld) != DTRAIN_PER_REPLICA_BATCH (%ld)\n",
            prog, b->micro, b->micro_size, b->per_replica);
    return 2;
  }
  return 0;
}

/* Every rank draws its own start (rank-dependent on purpose); the broadcast from rank 0 is what makes
 * the replicas equal. */
static int init_weights(model_t* m) {
  for (int j = 0; j < m->np; ++j) {
    const double u = uniform(0xabcdef00ULL + (uint64_t)m->rank * 1000003ULL + (uint64_t)j);
    m->w[j] = m->f64 ? u : (double)(float)u;
  }
  if (m->f64) {
    CALL(m, dtrain_broadcast(m->comm, m->w, m->w, (size_t)m->np, DTRAIN_FLOAT64, 0, NULL),
         "broadcast of the initial weights");
    return 0;
  }
  float wf[MAX_DIM + 1];
  for (int j = 0; j < m->np; ++j) wf[j] = (float)m->w[j];
  CALL(m, dtrain_broadcast(m->comm, wf, wf, (size_t)m->np, DTRAIN_FLOAT32, 0, NULL),
       "broadcast of the initial weights");
  for (int j = 0; j < m->np; ++j) m->w[j] = (double)wf[j];
  return 0;
}

/* Rank 0: the newest checkpoint of o->ckpt_dir into params (path into path): its step, -1 when there is
 * none, -2 after a message when it cannot be read or does not fit this run. */
static double load_newest(const model_t* m, const options_t* o, char* path, double* params) {
  char err[CKPT_PATH_MAX + 256];
  long step = 0;
  ckpt_state_t st;
  int found = ckpt_find_newest(o->ckpt_dir, path, CKPT_PATH_MAX, &step, err, sizeof err);
  if (found == 0) return -1;
  if (found > 0 && ckpt_load(path, &st, params, MAX_DIM + 1, err, sizeof err) == 0) {
    if (st.dim == m->dim && st.f64 == m->f64) return (double)st.step;
    snprintf(err, sizeof err, "the checkpoint %s was written with --dim %d%s, this run has --dim %d%s: run with the same "
             "options, or remove it to start afresh", path, st.dim, st.f64 ? " --float64" : "", m->dim,
             m->f64 ? " --float64" : "");
  }
  fprintf(stderr, "%s: rank %d: %s\n", prog, m->rank, err);
  return -2;
}

/* The starting point: rank 0's newest checkpoint, broadcast with its step (*start), or, when there is
 * none, step 0 and the initial weights. 0, 6 when the checkpoint is unusable, 10 + status. */
static int resume(model_t* m, const options_t* o, long* start) {
  *start = 0;
  if (o->ckpt_dir == NULL) return init_weights(m);
  double buf[MAX_DIM + 2] = {-1};  /* the step (-1: none, -2: unusable), then the parameters */
  char path[CKPT_PATH_MAX] = "";
  if (m->rank == 0) buf[0] = load_newest(m, o, path, buf + 1);
  CALL(m, dtrain_broadcast(m->comm, buf, buf, (size_t)m->np + 1, DTRAIN_FLOAT64, 0, NULL), "broadcast of the checkpoint");
  if (buf[0] == -2) return 6;
  if (buf[0] < 0) return init_weights(m);
  *start = (long)buf[0];
  memcpy(m->w, buf + 1, sizeof(double) * (size_t)m->np);
  if (m->rank == 0) {
    printf("resumed from step %ld (%s) at world size %d\n", *start, path, m->world);
    fflush(stdout);
  }
  return 0;
}

/* This rank's gradient of iteration t (the mean over its shard, accumulated over the micro-batches
 * with weight 1/micro), then the loss, into acc[0..np]. */
static void local_gradient(const model_t* m, const batch_t* b, long t, double* acc) {
  const long first = (long)m->rank * b->per_replica;
  const int dim = m->dim, np = m->np;
  double x[MAX_DIM];
  for (int j = 0; j <= np; ++j) acc[j] = 0;
  for (long u = 0; u < b->micro; ++u) {
    double g[MAX_DIM + 2] = {0};
    for (long k = 0; k < b->micro_size; ++k) {
      const long i = (t * b->global + first + u * b->micro_size + k) % b->dataset;
      const double y = sample(i, dim, x);
      double pred = m->w[dim];
      for (int j = 0; j < dim; ++j) pred += m->w[j] * x[j];
      const double err = pred - y;
      for (int j = 0; j < dim; ++j) g[j] += err * x[j];
      g[dim] += err;
      g[np] += 0.5 * err * err;
    }
    for (int j = 0; j <= np; ++j) acc[j] += g[j] / (double)b->micro_size / (double)b->micro;
  }
}

/* Averages acc (gradient, then loss) over the ranks and takes the SGD step; *loss gets the mean loss.
 * One allreduce carries both. */
static int sgd_step(model_t* m, double lr, double* acc, double* loss) {
  const size_t n = (size_t)m->np + 1;
  if (m->f64) {
    CALL(m, dtrain_allreduce(m->comm, acc, acc, n, DTRAIN_FLOAT64, DTRAIN_AVG, NULL), "gradient allreduce");
    for (int j = 0; j < m->np; ++j) m->w[j] -= lr * acc[j];
    *loss = acc[m->np];
    return 0;
  }
  float grad[MAX_DIM + 2];
  for (size_t j = 0; j < n; ++j) grad[j] = (float)acc[j];
  CALL(m, dtrain_allreduce(m->comm, grad, grad, n, DTRAIN_FLOAT32, DTRAIN_AVG, NULL), "gradient allreduce");
  for (int j = 0; j < m->np; ++j) m->w[j] = (double)((float)m->w[j] - (float)lr * grad[j]);
  *loss = (double)grad[m->np];
  return 0;
}

/* Rank 0 writes the checkpoint of step s (keeping the one before it); 0, or 6 after a message. */
static int save_checkpoint(const model_t* m, const options_t* o, long s) {
  char err[CKPT_PATH_MAX + 256];
  const ckpt_state_t st = {.step = s, .dim = m->dim, .f64 = m->f64, .params = m->w};
  if (ckpt_save(o->ckpt_dir, &st, s - 2 * o->ckpt_every, err, sizeof err) == 0) return 0;
  fprintf(stderr, "%s: rank %d: %s\n", prog, m->rank, err);
  return 6;
}

/* After completed step s: its checkpoint when one is due, the injected failure, the sleep. */
static int after_step(model_t* m, const options_t* o, long s) {
  int rc = 0;
  if (o->ckpt_every > 0 && s % o->ckpt_every == 0 && m->rank == 0) rc = save_checkpoint(m, o, s);
  if (rc != 0) return rc;
  if (s == o->fail_at && o->generation == 0) {
    /* rank 0's checkpoint of step s is complete before anyone fails */
    CALL(m, dtrain_barrier(m->comm), "barrier before the injected failure");
    if (m->rank == (o->fail_rank < m->world ? o->fail_rank : 0)) {
      fprintf(stderr, "%s: rank %d: failing after step %ld as asked (--fail-at-step)\n", prog, m->rank, s);
      /* as a crash would: no teardown, so this rank is gone before its peers hear of it (a clean
       * exit runs at-exit work, e.g. a sanitizer's leak check, while a peer already fails on it) */
      fflush(NULL);
      _exit(7);
    }
  }
  if (o->sleep_ms > 0) {
    const struct timespec ts = {.tv_sec = o->sleep_ms / 1000, .tv_nsec = (o->sleep_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
  }
  return 0;
}

/* The SGD steps start+1 .. epochs x iterations: step s is iteration (s-1) mod iters of its epoch. */
static int train(model_t* m, const batch_t* b, const options_t* o, long start, double* loss) {
  double acc[MAX_DIM + 2];
  for (long e = start / b->iters; e < b->epochs; ++e) {
    const long t0 = e == start / b->iters ? start % b->iters : 0;
    double epoch_loss = 0, step_loss = 0;
    for (long t = t0; t < b->iters; ++t) {
      local_gradient(m, b, t, acc);
      int rc = sgd_step(m, o->lr, acc, &step_loss);
      if (rc == 0) rc = after_step(m, o, e * b->iters + t + 1);
      if (rc != 0) return rc;
      epoch_loss += step_loss;
    }
    *loss = epoch_loss / (double)(b->iters - t0);
    if (m->rank == 0) {
      printf("epoch %ld/%ld: loss %.6f (%ld iterations of %ld samples)\n", e + 1, b->epochs, *loss, b->iters - t0,
             b->global);
      fflush(stdout);
    }
  }
  return 0;
}

/* Every replica must hold the same bits: MAX and MIN of (weights, checksum) over the ranks agree.
 * 0 when they do (*checksum set), 3 when not, 10 + status when a call fails. */
static int check_replicas(model_t* m, double* checksum) {
  double mine[MAX_DIM + 2], hi[MAX_DIM + 2], lo[MAX_DIM + 2];
  const int np = m->np;
  *checksum = 0;
  for (int j = 0; j < np; ++j) {
    mine[j] = m->w[j];
    *checksum += m->w[j] * (double)(j + 1);
  }
  mine[np] = *checksum;
  CALL(m, dtrain_allreduce(m->comm, mine, hi, (size_t)np + 1, DTRAIN_FLOAT64, DTRAIN_MAX, NULL), "weight check (max)");
  CALL(m, dtrain_allreduce(m->comm, mine, lo, (size_t)np + 1, DTRAIN_FLOAT64, DTRAIN_MIN, NULL), "weight check (min)");
  for (int j = 0; j <= np; ++j)
    if (hi[j] != lo[j]) {
      fprintf(stderr, "%s: rank %d: the replicas disagree: weight checksum ranges over [%.17g, %.17g]\n", prog,
              m->rank, lo[np], hi[np]);
      return 3;
    }
  return 0;
}

/* The largest |w - w_true| over the weights and the bias. */
static double weight_error(const model_t* m) {
  double werr = 0;
  for (int j = 0; j < m->np; ++j) {
    const double want = j < m->dim ? true_weight(j) : true_bias;
    werr = fmax(werr, fabs(m->w[j] - want));
  }
  return werr;
}

/* 0, or 5 after a message naming the file. */
static int write_weights(const model_t* m, const char* path) {
  FILE* f = fopen(path, "w");
  int ok = f != NULL;
  for (int j = 0; ok && j < m->np; ++j) ok = fprintf(f, "%.17g\n", m->w[j]) > 0;
  if (f != NULL && fclose(f) != 0) ok = 0;
  if (ok) return 0;
  fprintf(stderr, "%s: rank %d: cannot write the weights to %s: %s\n", prog, m->rank, path, strerror(errno));
  return 5;
}

/* Training and the checks on an initialized communicator; the exit status. */
static int run(model_t* m, const batch_t* b, const options_t* o) {
  CALL(m, dtrain_comm_rank(m->comm, &m->rank), "rank");
  CALL(m, dtrain_comm_size(m->comm, &m->world), "size");
  if (b->per_replica * m->world != b->global) {
    fprintf(stderr, "%s: rank %d: DTRAIN_PER_REPLICA_BATCH (%ld) x world size (%d) != DTRAIN_GLOBAL_BATCH (%ld)\n",
            prog, m->rank, b->per_replica, m->world, b->global);
    return 2;
  }
  const char* node = getenv("DTRAIN_NODE_RANK");
  if (node == NULL || *node == '\0') node = getenv("GROUP_RANK");
  if (node == NULL || *node == '\0') node = "?";
  const long first = (long)m->rank * b->per_replica;
  printf("rank %d/%d on node %s: shard [%ld, %ld) of each global batch of %ld, %ld micro-batches of %ld\n", m->rank,
         m->world, node, first, first + b->per_replica, b->global, b->micro, b->micro_size);
  fflush(stdout);

  double loss = 0, checksum = 0;
  long start = 0;
  int rc = resume(m, o, &start);
  if (rc == 0) rc = train(m, b, o, start, &loss);
  if (rc == 0) rc = check_replicas(m, &checksum);
  if (rc != 0) return rc;
  const double werr = weight_error(m);
  if (m->rank == 0) {
    printf("done: %ld epochs, final loss %.6f, max |w - w_true| %.4f; weights identical on all %d ranks "
           "(checksum %.9g)\n",
           b->epochs, loss, werr, m->world, checksum);
    fflush(stdout);
    if (o->weights_out != NULL && (rc = write_weights(m, o->weights_out)) != 0) return rc;
  }
  if (werr > 0.05) {
    fprintf(stderr, "%s: rank %d: the model did not converge (max weight error %.4f > 0.05); try a smaller --lr\n",
            prog, m->rank, werr);
    return 4;
  }
  return 0;
}

int main(int argc, char** argv) {
  options_t o;
  batch_t b;
  int rc = parse_args(argc, argv, &o);
  if (rc == 0) rc = read_batch(&b);
  if (rc != 0) return rc;

  model_t m = {.comm = NULL, .rank = -1, .world = 0, .dim = o.dim, .np = o.dim + 1, .f64 = o.f64};
  rc = check(dtrain_comm_init_from_env(&m.comm), "init", m.rank);
  if (rc != 0) return rc;
  rc = run(&m, &b, &o);
  const int destroyed = check(dtrain_comm_destroy(m.comm), "destroy", m.rank);
  return rc != 0 ? rc : destroyed;
}
