/* A training-worker-shaped C program for dtrain's collectives: run it under `dtrain launch`.
 *
 *   c_allreduce [--count N] [--iters N] [--die-rank R --die-at I [--die-after-us U]]
 *               [--stall-rank R --stall-at I] [--ignore-sigterm]
 *
 * Each iteration allreduces (sum, float32 and int64), broadcasts from the last rank, allgathers and
 * reduce-scatters, and checks every result exactly. Prints "rank R/N ok" at the end and exits 0;
 * on a failed call prints the status and dtrain_last_error() and exits 10 + status.
 * --die-rank/--die-at make rank R kill itself with SIGKILL in the middle of iteration I (a test of
 * failure detection); with --die-after-us it does so U microseconds into iteration I's float32
 * allreduce instead (a peer dying while the others copy from and into its buffers); --stall-rank/--stall-at make rank R stop calling collectives at iteration I
 * (it sleeps until it is killed: a hang for the launcher to diagnose); --ignore-sigterm keeps the
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

#define CALL(expr, what)                     \
  do {                                       \
    int rc_ = check((expr), (what), rank);   \
    if (rc_ != 0) {                          \
      dtrain_comm_destroy(comm);             \
      return rc_;                            \
    }                                        \
  } while (0)

int main(int argc, char** argv) {
  size_t count = 100000;
  int iters = 3, die_rank = -1, die_at = -1, stall_rank = -1, stall_at = -1;
  long die_after_us = -1;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--count") && i + 1 < argc) count = (size_t)strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--die-rank") && i + 1 < argc) die_rank = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--die-at") && i + 1 < argc) die_at = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--die-after-us") && i + 1 < argc) die_after_us = atol(argv[++i]);
    else if (!strcmp(argv[i], "--stall-rank") && i + 1 < argc) stall_rank = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--stall-at") && i + 1 < argc) stall_at = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--ignore-sigterm")) signal(SIGTERM, SIG_IGN);
    else {
      fprintf(stderr, "usage: %s [--count N] [--iters N] [--die-rank R --die-at I [--die-after-us U]] "
                      "[--stall-rank R --stall-at I] [--ignore-sigterm]\n", argv[0]);
      return 2;
    }
  }
  dtrain_comm_t comm = NULL;
  int rank = -1, size = 0;
  int rc = check(dtrain_comm_init_from_env(&comm), "init", rank);
  if (rc != 0) return rc;
  CALL(dtrain_comm_rank(comm, &rank), "rank");
  CALL(dtrain_comm_size(comm, &size), "size");

  float* f = malloc(count * sizeof(float));
  int64_t* l = malloc(count * sizeof(int64_t));
  int32_t* b = malloc(count * sizeof(int32_t));
  int32_t* g = malloc(count * (size_t)size * sizeof(int32_t));
  int32_t* rs = malloc(count * sizeof(int32_t));
  if (!f || !l || !b || !g || !rs) {
    fprintf(stderr, "rank %d: out of memory\n", rank);
    return 1;
  }
  for (int it = 0; it < iters; ++it) {
    for (size_t i = 0; i < count; ++i) {
      f[i] = (float)((int)(i % 13) + rank);
      l[i] = (int64_t)i * (rank + 1);
    }
    if (rank == die_rank && it == die_at) {
      if (die_after_us < 0) raise(SIGKILL);
      struct itimerval t = {{0, 0}, {die_after_us / 1000000, die_after_us % 1000000 + (die_after_us == 0)}};
      signal(SIGALRM, die_now);
      setitimer(ITIMER_REAL, &t, NULL);
    }
    if (rank == stall_rank && it == stall_at)
      for (;;) pause();
    CALL(dtrain_allreduce(comm, f, f, count, DTRAIN_FLOAT32, DTRAIN_SUM, NULL), "allreduce float32");
    CALL(dtrain_allreduce(comm, l, l, count, DTRAIN_INT64, DTRAIN_SUM, NULL), "allreduce int64");
    for (size_t i = 0; i < count; ++i) {
      float want = (float)((int)(i % 13) * size + size * (size - 1) / 2);
      int64_t lwant = (int64_t)i * size * (size + 1) / 2;
      if (f[i] != want || l[i] != lwant) {
        fprintf(stderr, "rank %d: allreduce wrong at %zu: %g/%lld, want %g/%lld\n", rank, i, (double)f[i],
                (long long)l[i], (double)want, (long long)lwant);
        return 3;
      }
    }
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
  }
  printf("rank %d/%d ok (count %zu, %d iterations, dtrain %s)\n", rank, size, count, iters, dtrain_version());
  free(f);
  free(l);
  free(b);
  free(g);
  free(rs);
  return check(dtrain_comm_destroy(comm), "destroy", rank);
}
