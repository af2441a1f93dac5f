/* Point-to-point ping-pong of dtrain's send/recv (host buffers) between ranks 0 and 1, run as a
 * ranked worker under `dtrain launch`; bench/p2p/mpi_p2p.c is the same loop on MPI_Send/MPI_Recv.
 *
 *   p2p_bench [--sizes 8,64,512,4K,32K,64K,256K,1M,4M,16M,64M] [--iters N]
 *
 * Per size: 10 warm-up round trips, then timed ones (2000 up to 64 KiB, 200 up to 1 MiB, 20 above),
 * rank 0 sending and waiting for the echo. time = half a round trip (one-way latency), bw = bytes /
 * time (IMB PingPong). Every echo's first and last byte are checked; "wrong" counts mismatches.
 * Prints "p2p BYTES ITERS TIME_US BW_GBS WRONG" lines on rank 0. */
#include <dtrain/collectives.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../bench_util.h"

static int fail(const char* what, dtrain_status_t st) {
  fprintf(stderr, "p2p_bench: %s: %s: %s\n", what, dtrain_status_string(st), dtrain_last_error());
  return 1;
}

/* One round trip from rank 0 (rank 1 echoes); returns the count of wrong bytes seen. */
static int round_trip(dtrain_comm_t c, int rank, unsigned char* buf, size_t bytes, unsigned char mark, int* rc) {
  dtrain_status_t st;
  if (rank == 0) {
    buf[0] = buf[bytes - 1] = mark;
    if ((st = dtrain_send(c, buf, bytes, DTRAIN_UINT8, 1, 0, NULL)) != DTRAIN_SUCCESS) *rc = fail("send", st);
    buf[0] = buf[bytes - 1] = 0;
    if ((st = dtrain_recv(c, buf, bytes, DTRAIN_UINT8, 1, 0, NULL)) != DTRAIN_SUCCESS) *rc = fail("recv", st);
    return buf[0] != mark || buf[bytes - 1] != mark;
  }
  if ((st = dtrain_recv(c, buf, bytes, DTRAIN_UINT8, 0, 0, NULL)) != DTRAIN_SUCCESS) *rc = fail("recv", st);
  if ((st = dtrain_send(c, buf, bytes, DTRAIN_UINT8, 0, 0, NULL)) != DTRAIN_SUCCESS) *rc = fail("send", st);
  return 0;
}

int main(int argc, char** argv) {
  char sizes[256] = "8,64,512,4K,32K,64K,256K,1M,4M,16M,64M";
  int iters_override = 0;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--sizes") && i + 1 < argc) snprintf(sizes, sizeof sizes, "%s", argv[++i]);
    else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters_override = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: p2p_bench [--sizes 8,64,...,64M] [--iters N]\n");
      return 2;
    }
  }
  dtrain_comm_t c;
  dtrain_status_t st = dtrain_comm_init_from_env(&c);
  if (st != DTRAIN_SUCCESS) return fail("init", st);
  int rank, size, rc = 0;
  dtrain_comm_rank(c, &rank);
  dtrain_comm_size(c, &size);
  if (size != 2) {
    fprintf(stderr, "p2p_bench: run it with 2 ranks (got %d)\n", size);
    return 2;
  }
  if (rank == 0) printf("%-4s %10s %7s %10s %9s %5s\n", "op", "bytes", "iters", "time_us", "bw_GBs", "wrong");
  for (char* tok = strtok(sizes, ","); tok != NULL && rc == 0; tok = strtok(NULL, ",")) {
    const size_t bytes = parse_size(tok);
    const int iters = iters_override > 0 ? iters_override : bytes <= 65536 ? 2000 : bytes <= (1u << 20) ? 200 : 20;
    unsigned char* buf = malloc(bytes);
    memset(buf, 1, bytes);
    int wrong = 0;
    for (int w = 0; w < 10; ++w) wrong += round_trip(c, rank, buf, bytes, (unsigned char)(w + 2), &rc);
    dtrain_barrier(c);
    const double t0 = now_s();
    for (int it = 0; it < iters && rc == 0; ++it) wrong += round_trip(c, rank, buf, bytes, (unsigned char)(it % 200 + 20), &rc);
    const double t = (now_s() - t0) / iters / 2;
    if (rank == 0) printf("%-4s %10zu %7d %10.2f %9.3f %5d\n", "p2p", bytes, iters, t * 1e6, (double)bytes / t / 1e9, wrong);
    fflush(stdout);
    free(buf);
  }
  dtrain_comm_destroy(c);
  return rc;
}
