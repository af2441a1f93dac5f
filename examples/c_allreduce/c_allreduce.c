/* A training-worker-shaped C program for dtrain's collectives: run it under `dtrain launch`.
 *
 *   c_allreduce [--count N] [--iters N] [--die-rank R --die-at I [--die-after-us U]]
 *               [--stall-rank R --stall-at I] [--slow-rank R --slow-us U] [--ignore-sigterm]
 *
 * Each iteration allreduces (sum, float32 and int64), broadcasts from the last rank, allgathers and
 * reduce-scatters, and checks every result exactly. Prints "rank R/N ok" at the end and exits 0;
 * on a failed call prints the status and dtrain_last_error() and exits 10 + status.
 * --die-rank/--die-at make rank R kill itself with SIGKILL in the middle of iteration I (a test of
 * failure detection); with --die-after-us it does so U microseconds into iteration I's float32
 * allreduce instead (a peer dying while the others copy from and into its buffers);
 * --stall-rank/--stall-at make rank R stop calling collectives at iteration I (it sleeps until it is killed: a hang for the launcher to diagnose);
 * --slow-rank/--slow-us make rank R sleep U microseconds before each iteration (a straggler: the
 * others wait for it in the first allreduce); --ignore-sigterm keeps the
 * survivors alive long enough to report. */
#include <dtrain/collectives.h>

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static void die_now(int sig) {
  (void)sig;
  raise(SIGKILL);
}

static int check(dtrain_status_t st, const char* what, int rank) {
  if (st == DTRAIN_SUCCESS) return 0;
  fprintf(stderr, "rank %d: %s failed: %s (%d): %s\n", rank, what, dtrain_status_string(st), (int)st,
          dtrain_last_error());
  fflush(stderr);
  return 10 + (int)st;
}

/* A failed call returns its exit status from the enclosing function (the caller destroys the comm). */
#define CALL(expr, what)                   \
  do {                                     \
    int rc_ = check((expr), (what), rank); \
    if (rc_ != 0) return rc_;              \
  } while (0)

typedef struct {
  size_t count;
  int iters, die_rank, die_at, stall_rank, stall_at, slow_rank;
  long die_after_us, slow_us;
} Options;

typedef struct {
  float* f;
  int64_t* l;
  int32_t *b, *g, *rs;
} Buffers;

/* 0, or 2 after a usage line. */
static int parse(int argc, char** argv, Options* o) {
  *o = (Options){100000, 3, -1, -1, -1, -1, -1, -1, 0};
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--count") && i + 1 < argc) o->count = (size_t)strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--iters") && i + 1 < argc) o->iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--die-rank") && i + 1 < argc) o->die_rank = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--die-at") && i + 1 < argc) o->die_at = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--die-after-us") && i + 1 < argc) o->die_after_us = atol(argv[++i]);
    else if (!strcmp(argv[i], "--stall-rank") && i + 1 < argc) o->stall_rank = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--stall-at") && i + 1 < argc) o->stall_at = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--slow-rank") && i + 1 < argc) o->slow_rank = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--slow-us") && i + 1 < argc) o->slow_us = atol(argv[++i]);
    else if (!strcmp(argv[i], "--ignore-sigterm")) signal(SIGTERM, SIG_IGN);
    else {
      fprintf(stderr, "usage: %s [--count N] [--iters N] [--die-rank R --die-at I [--die-after-us U]] "
                      "[--stall-rank R --stall-at I] [--slow-rank R --slow-us U] [--ignore-sigterm]\n", argv[0]);
      return 2;
    }
  }
  return 0;
}

/* The failure a test asked for at iteration `it`: SIGKILL now or a timer into the next call, or a stall. */
static void inject(const Options* o, int rank, int it) {
  if (rank == o->die_rank && it == o->die_at) {
    if (o->die_after_us < 0) raise(SIGKILL);
    long us = o->die_after_us;
    struct itimerval t = {{0, 0}, {us / 1000000, us % 1000000 + (us == 0)}};
    signal(SIGALRM, die_now);
    setitimer(ITIMER_REAL, &t, NULL);
  }
  if (rank == o->stall_rank && it == o->stall_at)
    for (;;) pause();
  if (rank == o->slow_rank && o->slow_us > 0) usleep((useconds_t)o->slow_us);
}

static int allreduces(dtrain_comm_t comm, const Options* o, Buffers* x, int rank, int size, int it) {
  size_t count = o->count;
  for (size_t i = 0; i < count; ++i) {
    x->f[i] = (float)((int)(i % 13) + rank);
    x->l[i] = (int64_t)i * (rank + 1);
  }
  inject(o, rank, it);
  CALL(dtrain_allreduce(comm, x->f, x->f, count, DTRAIN_FLOAT32, DTRAIN_SUM, NULL), "allreduce float32");
  CALL(dtrain_allreduce(comm, x->l, x->l, count, DTRAIN_INT64, DTRAIN_SUM, NULL), "allreduce int64");
  for (size_t i = 0; i < count; ++i) {
    float want = (float)((int)(i % 13) * size + size * (size - 1) / 2);
    int64_t lwant = (int64_t)i * size * (size + 1) / 2;
    if (x->f[i] != want || x->l[i] != lwant) {
      fprintf(stderr, "rank %d: allreduce wrong at %zu: %g/%lld, want %g/%lld\n", rank, i, (double)x->f[i],
              (long long)x->l[i], (double)want, (long long)lwant);
      return 3;
    }
  }
  return 0;
}

static int others(dtrain_comm_t comm, size_t count, Buffers* x, int rank, int size, int it) {
  int32_t *b = x->b, *g = x->g, *rs = x->rs;
  for (size_t i = 0; i < count; ++i) b[i] = rank == size - 1 ? (int32_t)(i * 3 + (size_t)it) : -1;
  CALL(dtrain_broadcast(comm, b, b, count, DTRAIN_INT32, size - 1, NULL), "broadcast");
  for (size_t i = 0; i < count; ++i)
    if (b[i] != (int32_t)(i * 3 + (size_t)it)) {
      fprintf(stderr, "rank %d: broadcast wrong at %zu\n", rank, i);
      return 3;
    }
  for (size_t i = 0; i < count; ++i) b[i] = (int32_t)(rank * 1000 + (int)(i % 1000));
  CALL(dtrain_allgather(comm, b, g, count, DTRAIN_INT32, NULL), "allgather");
  for (int r = 0; r < size; ++r)
    for (size_t i = 0; i < count; ++i)
      if (g[(size_t)r * count + i] != (int32_t)(r * 1000 + (int)(i % 1000))) {
        fprintf(stderr, "rank %d: allgather wrong at block %d [%zu]\n", rank, r, i);
        return 3;
      }
  for (size_t i = 0; i < count * (size_t)size; ++i) g[i] = (int32_t)(i % 7);
  CALL(dtrain_reduce_scatter(comm, g, rs, count, DTRAIN_INT32, DTRAIN_SUM, NULL), "reduce_scatter");
  for (size_t i = 0; i < count; ++i)
    if (rs[i] != (int32_t)((((size_t)rank * count + i) % 7) * (size_t)size)) {
      fprintf(stderr, "rank %d: reduce_scatter wrong at %zu\n", rank, i);
      return 3;
    }
  CALL(dtrain_barrier(comm), "barrier");
  return 0;
}

static int train(dtrain_comm_t comm, const Options* o, int* rank) {
  int size = 0;
  int rc = check(dtrain_comm_rank(comm, rank), "rank", *rank);
  if (rc == 0) rc = check(dtrain_comm_size(comm, &size), "size", *rank);
  if (rc != 0) return rc;
  size_t count = o->count;
  Buffers x = {malloc(count * sizeof(float)), malloc(count * sizeof(int64_t)), malloc(count * sizeof(int32_t)),
               malloc(count * (size_t)size * sizeof(int32_t)), malloc(count * sizeof(int32_t))};
  if (!x.f || !x.l || !x.b || !x.g || !x.rs) {
    fprintf(stderr, "rank %d: out of memory\n", *rank);
    rc = 1;
  }
  for (int it = 0; rc == 0 && it < o->iters; ++it) {
    rc = allreduces(comm, o, &x, *rank, size, it);
    if (rc == 0) rc = others(comm, count, &x, *rank, size, it);
  }
  if (rc == 0)
    printf("rank %d/%d ok (count %zu, %d iterations, dtrain %s)\n", *rank, size, count, o->iters, dtrain_version());
  free(x.f);
  free(x.l);
  free(x.b);
  free(x.g);
  free(x.rs);
  return rc;
}

int main(int argc, char** argv) {
  Options o;
  int rc = parse(argc, argv, &o);
  if (rc != 0) return rc;
  dtrain_comm_t comm = NULL;
  int rank = -1;
  rc = check(dtrain_comm_init_from_env(&comm), "init", rank);
  if (rc != 0) return rc;
  rc = train(comm, &o, &rank);
  int destroyed = check(dtrain_comm_destroy(comm), "destroy", rank);
  return rc != 0 ? rc : destroyed;
}
