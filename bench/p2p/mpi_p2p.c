/* The ping-pong of p2p_bench.c on MPI_Send/MPI_Recv (Open MPI), for bench/p2p/compare.sh: the same
 * sizes, iterations, warm-up and checks; prints the same "p2p BYTES ITERS TIME_US BW_GBS WRONG" lines. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const size_t sizes[] = {8, 64, 512, 4096, 32768, 65536, 262144, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
  if (rank == 0) printf("%-4s %10s %7s %10s %9s %5s\n", "op", "bytes", "iters", "time_us", "bw_GBs", "wrong");
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; ++s) {
    const size_t bytes = sizes[s];
    const int iters = bytes <= 65536 ? 2000 : bytes <= (1u << 20) ? 200 : 20;
    unsigned char* buf = malloc(bytes);
    memset(buf, 1, bytes);
    int wrong = 0;
    double t0 = 0;
    for (int it = -10; it < iters; ++it) {
      if (it == 0) {
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
      }
      const unsigned char mark = (unsigned char)(it < 0 ? it + 12 : it % 200 + 20);
      if (rank == 0) {
        buf[0] = buf[bytes - 1] = mark;
        MPI_Send(buf, (int)bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
        buf[0] = buf[bytes - 1] = 0;
        MPI_Recv(buf, (int)bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        wrong += buf[0] != mark || buf[bytes - 1] != mark;
      } else if (rank == 1) {
        MPI_Recv(buf, (int)bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buf, (int)bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
      }
    }
    const double t = (MPI_Wtime() - t0) / iters / 2;
    if (rank == 0) printf("%-4s %10zu %7d %10.2f %9.3f %5d\n", "p2p", bytes, iters, t * 1e6, (double)bytes / t / 1e9, wrong);
    fflush(stdout);
    free(buf);
  }
  MPI_Finalize();
  return 0;
}
