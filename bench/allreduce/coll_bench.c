/* nccl-tests style benchmark of dtrain's collectives (host buffers), run as a ranked worker under
 * `dtrain launch`:
 *
 *   coll_bench [--op allreduce|broadcast|allgather|reduce_scatter|all] [--sizes 8,1K,64K,1M,16M,64M]
 *              [--warmup N] [--iters N] [--check 0|1] [--buffers N] [--memcpy]
 *
 * float32 sum. Per size: warm-up calls (default: a tenth of the timed ones, at least 5), then timed
 * iterations (default: 2000 up to 64 KiB, 200 up to 1 MiB, 20 above; warm-up and iterations as the
 * Open MPI probe in the comparison), the slowest rank's mean time, then a checked call. Buffers
 * rotate (enough of them to exceed 256 MiB per rank at large sizes, so the caches do not flatter
 * large messages); --buffers 1 reuses one send and one receive buffer, as the Open MPI probe does,
 * for a like-for-like comparison. algbw = bytes / time; busbw = algbw x 2(n-1)/n for
 * allreduce, (n-1)/n for allgather/reduce_scatter (bytes = the full buffer), 1 for broadcast.
 * --memcpy prints this machine's single-core memcpy bandwidth (the ceiling) and exits. */
#include <dtrain/collectives.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../bench_util.h"

static void free_buffers(char** bufs, int n) {
  for (int i = 0; i < n; ++i) free(bufs[i]);
}

static int memcpy_bw(void) {
  const size_t bytes = 64u << 20;
  enum { nbuf = 4 };
  char* src[nbuf] = {0};
  char* dst[nbuf] = {0};
  for (int i = 0; i < nbuf; ++i) {
    src[i] = malloc(bytes);
    dst[i] = malloc(bytes);
    if (!src[i] || !dst[i]) {
      fprintf(stderr, "coll_bench: out of memory for the memcpy buffers (%d x 2 x %zu bytes)\n", nbuf, bytes);
      free_buffers(src, nbuf);
      free_buffers(dst, nbuf);
      return 1;
    }
    memset(src[i], i + 1, bytes);
    memset(dst[i], 0, bytes);
  }
  for (int i = 0; i < nbuf; ++i) memcpy(dst[i], src[i], bytes);
  const int iters = 20;
  double t0 = now_s();
  for (int it = 0; it < iters; ++it) memcpy(dst[it % nbuf], src[(it + 1) % nbuf], bytes);
  double t = (now_s() - t0) / iters;
  printf("memcpy %zu bytes: %.2f us, %.3f GB/s\n", bytes, t * 1e6, (double)bytes / t / 1e9);
  int bad = dst[1][5] == 0;
  free_buffers(src, nbuf);
  free_buffers(dst, nbuf);
  return bad;
}

enum { OP_ALLREDUCE, OP_BROADCAST, OP_ALLGATHER, OP_REDUCE_SCATTER, OP_COUNT };
static const char* kOpNames[OP_COUNT] = {"allreduce", "broadcast", "allgather", "reduce_scatter"};

int main(int argc, char** argv) {
  const char* sizes_arg = "8,1K,64K,1M,16M,64M";
  int ops[OP_COUNT] = {1, 0, 0, 0};
  int warmup = -1, iters_override = 0, check = 1, buffers = 0;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--memcpy")) return memcpy_bw();
    if (!strcmp(argv[i], "--op") && i + 1 < argc) {
      const char* o = argv[++i];
      memset(ops, 0, sizeof ops);
      int found = 0;
      for (int k = 0; k < OP_COUNT; ++k)
        if (!strcmp(o, kOpNames[k]) || !strcmp(o, "all")) ops[k] = found = 1;
      if (!found) {
        fprintf(stderr, "coll_bench: unknown --op %s\n", o);
        return 2;
      }
    } else if (!strcmp(argv[i], "--sizes") && i + 1 < argc) sizes_arg = argv[++i];
    else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) warmup = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters_override = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--check") && i + 1 < argc) check = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--buffers") && i + 1 < argc) buffers = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: coll_bench [--op NAME|all] [--sizes LIST] [--warmup N] [--iters N] [--check 0|1] "
                      "[--buffers N] [--memcpy]\n");
      return 2;
    }
  }
  size_t sizes[64];
  int nsizes = 0;
  {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", sizes_arg);
    for (char* tok = strtok(buf, ","); tok && nsizes < 64; tok = strtok(NULL, ",")) sizes[nsizes++] = parse_size(tok);
  }
  dtrain_comm_t comm;
  if (dtrain_comm_init_from_env(&comm) != DTRAIN_SUCCESS) {
    fprintf(stderr, "coll_bench: init: %s\n", dtrain_last_error());
    return 1;
  }
  int rank, n;
  dtrain_comm_rank(comm, &rank);
  dtrain_comm_size(comm, &n);
  if (rank == 0) {
    const char* t = getenv("DTRAIN_TRANSPORT");
    printf("# dtrain %s, %d ranks, transport %s, float32 sum\n", dtrain_version(), n, t && *t ? t : "auto");
    printf("%-15s %12s %12s %6s %6s %8s %12s %10s %10s %7s\n", "# op", "size", "count", "type", "redop", "iters",
           "time_us", "algbw_GBs", "busbw_GBs", "#wrong");
  }
  int status = 0;
  for (int k = 0; k < OP_COUNT; ++k) {
    if (!ops[k]) continue;
    for (int s = 0; s < nsizes; ++s) {
      size_t bytes = sizes[s];
      size_t count = bytes / sizeof(float);
      if (k == OP_ALLGATHER || k == OP_REDUCE_SCATTER) count = count / (size_t)n;  /* per-rank part */
      if (count == 0) count = 1;
      const size_t full = (k == OP_ALLGATHER || k == OP_REDUCE_SCATTER) ? count * (size_t)n : count;
      const size_t send_n = k == OP_REDUCE_SCATTER ? full : count, recv_n = k == OP_ALLGATHER ? full : count;
      int nbuf = (int)((256u << 20) / ((send_n + recv_n) * sizeof(float)) + 1);
      if (nbuf > 8) nbuf = 8;
      if (nbuf < 2) nbuf = 2;
      if (buffers > 0) nbuf = buffers < 8 ? buffers : 8;
      float* sb[8];
      float* rb[8];
      for (int b = 0; b < nbuf; ++b) {
        sb[b] = malloc(send_n * sizeof(float));
        rb[b] = malloc(recv_n * sizeof(float));
        if (!sb[b] || !rb[b]) {
          fprintf(stderr, "coll_bench: out of memory\n");
          return 1;
        }
        for (size_t i = 0; i < send_n; ++i) sb[b][i] = (float)(rank + (int)(i % 7));
        memset(rb[b], 0, recv_n * sizeof(float));
      }
      int iters = iters_override > 0 ? iters_override : (bytes <= 65536 ? 2000 : (bytes <= (1u << 20) ? 200 : 20));
      dtrain_status_t st = DTRAIN_SUCCESS;
#define RUN(b)                                                                                             \
  (k == OP_ALLREDUCE ? dtrain_allreduce(comm, sb[b], rb[b], count, DTRAIN_FLOAT32, DTRAIN_SUM, NULL)       \
   : k == OP_BROADCAST ? dtrain_broadcast(comm, sb[b], rb[b], count, DTRAIN_FLOAT32, 0, NULL)             \
   : k == OP_ALLGATHER ? dtrain_allgather(comm, sb[b], rb[b], count, DTRAIN_FLOAT32, NULL)                \
                       : dtrain_reduce_scatter(comm, sb[b], rb[b], count, DTRAIN_FLOAT32, DTRAIN_SUM, NULL))
      const int warm = warmup >= 0 ? warmup : (iters / 10 > 5 ? iters / 10 : 5);
      for (int w = 0; w < warm && st == DTRAIN_SUCCESS; ++w) st = RUN(w % nbuf);
      if (st == DTRAIN_SUCCESS) st = dtrain_barrier(comm);
      double t0 = now_s();
      for (int it = 0; it < iters && st == DTRAIN_SUCCESS; ++it) st = RUN(it % nbuf);
      double t = (now_s() - t0) / iters;
      if (st != DTRAIN_SUCCESS) {
        fprintf(stderr, "coll_bench: rank %d: %s %zu bytes: %s: %s\n", rank, kOpNames[k], bytes,
                dtrain_status_string(st), dtrain_last_error());
        return 1;
      }
      double tmax = t;
      dtrain_allreduce(comm, &tmax, &tmax, 1, DTRAIN_FLOAT64, DTRAIN_MAX, NULL);
      /* Result check on fresh data. */
      long long wrong = 0;
      if (check) {
        for (size_t i = 0; i < send_n; ++i) sb[0][i] = (float)(rank + (int)(i % 7));
        memset(rb[0], 0, recv_n * sizeof(float));
        st = RUN(0);
        for (size_t i = 0; i < recv_n && st == DTRAIN_SUCCESS; ++i) {
          float want;
          if (k == OP_ALLREDUCE) want = (float)((int)(i % 7) * n + n * (n - 1) / 2);
          else if (k == OP_BROADCAST) want = (float)(int)(i % 7);
          else if (k == OP_ALLGATHER) want = (float)((int)(i / count) + (int)((i % count) % 7));
          else want = (float)((int)(((size_t)rank * count + i) % 7) * n + n * (n - 1) / 2);
          wrong += rb[0][i] != want;
        }
        dtrain_allreduce(comm, &wrong, &wrong, 1, DTRAIN_INT64, DTRAIN_SUM, NULL);
      }
      const double data = (double)(full * sizeof(float));
      const double alg = data / tmax / 1e9;
      const double factor = k == OP_ALLREDUCE ? 2.0 * (n - 1) / n : (k == OP_BROADCAST ? 1.0 : (double)(n - 1) / n);
      if (rank == 0)
        printf("%-15s %12zu %12zu %6s %6s %8d %12.3f %10.3f %10.3f %7lld\n", kOpNames[k], full * sizeof(float), full,
               "float", k == OP_ALLREDUCE || k == OP_REDUCE_SCATTER ? "sum" : "-", iters, tmax * 1e6, alg,
               alg * factor, wrong);
      fflush(stdout);
      if (wrong) status = 3;
      for (int b = 0; b < nbuf; ++b) {
        free(sb[b]);
        free(rb[b]);
      }
    }
  }
  dtrain_comm_destroy(comm);
  return status;
}
