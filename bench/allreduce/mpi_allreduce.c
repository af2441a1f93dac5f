/* Open MPI's MPI_Allreduce measured the way bench/allreduce/coll_bench measures dtrain_allreduce, so
 * bench/run-all.sh can put both in one table. Built with mpicc by the scripts (MPI is optional).
 *
 *   mpirun -np 2 mpi_allreduce [--sizes 8,1K,64K,1M,16M,64M]
 *
 * float32 sum, one send and one receive buffer (as the anchor probe), warm-up calls (a tenth of the
 * timed ones, at least 5), a barrier, then 2000 (up to 64 KiB), 200 (up to 1 MiB) or 20 timed calls;
 * the slowest rank's mean time; then every element of a fresh call checked. Rank 0 prints
 * coll_bench's columns: op, size, count, type, redop, iters, time_us, algbw_GBs, busbw_GBs, #wrong. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bench_util.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  char sizes_arg[1024] = "8,1K,64K,1M,16M,64M";
  for (int i = 1; i + 1 < argc; ++i)
    if (!strcmp(argv[i], "--sizes")) snprintf(sizes_arg, sizeof sizes_arg, "%s", argv[++i]);
  int status = 0;
  for (char* tok = strtok(sizes_arg, ","); tok; tok = strtok(NULL, ",")) {
    size_t cnt = parse_size(tok) / sizeof(float);
    if (!cnt) cnt = 1;
    float* a = malloc(cnt * sizeof(float));
    float* b = malloc(cnt * sizeof(float));
    if (!a || !b) MPI_Abort(MPI_COMM_WORLD, 1);
    for (size_t i = 0; i < cnt; i++) a[i] = (float)(rank + (int)(i % 7));
    memset(b, 0, cnt * sizeof(float));
    const size_t bytes = cnt * sizeof(float);
    int iters = bytes <= 65536 ? 2000 : (bytes <= (1u << 20) ? 200 : 20);
    const int warm = iters / 10 > 5 ? iters / 10 : 5;
    for (int w = 0; w < warm; w++) MPI_Allreduce(a, b, (int)cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int it = 0; it < iters; it++) MPI_Allreduce(a, b, (int)cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double t = (MPI_Wtime() - t0) / iters, tmax;
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    memset(b, 0, cnt * sizeof(float));
    MPI_Allreduce(a, b, (int)cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    long long wrong = 0, total;
    for (size_t i = 0; i < cnt; i++) wrong += b[i] != (float)((int)(i % 7) * n + n * (n - 1) / 2);
    MPI_Allreduce(&wrong, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
      double alg = (double)bytes / tmax / 1e9;
      printf("%-15s %12zu %12zu %6s %6s %8d %12.2f %10.3f %10.3f %7lld\n", "allreduce", bytes, cnt, "float", "sum",
             iters, tmax * 1e6, alg, alg * 2.0 * (n - 1) / n, total);
      fflush(stdout);
    }
    if (total) status = 3;
    free(a);
    free(b);
  }
  MPI_Finalize();
  return status;
}
