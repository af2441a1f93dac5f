/* Sums the ranks with dtrain_allreduce, passes a token around the ring with dtrain_sendrecv, splits
 * the world by parity, and checks every result. */
#include <dtrain/collectives.h>
#include <stdio.h>

static int fail(const char* what) {
  fprintf(stderr, "%s: %s\n", what, dtrain_last_error());
  return 1;
}

int main(void) {
  dtrain_comm_t comm, half;
  int rank, size, hrank, hsize;
  if (dtrain_comm_init_from_env(&comm) != DTRAIN_SUCCESS) return fail("init");
  dtrain_comm_rank(comm, &rank);
  dtrain_comm_size(comm, &size);
  long long x = rank;
  if (dtrain_allreduce(comm, &x, &x, 1, DTRAIN_INT64, DTRAIN_SUM, NULL) != DTRAIN_SUCCESS) return fail("allreduce");
  if (x != (long long)size * (size - 1) / 2) return 3;
  int token = rank, got = -1;
  if (dtrain_sendrecv(comm, &token, 1, DTRAIN_INT32, (rank + 1) % size, 0, &got, 1, DTRAIN_INT32,
                      (rank + size - 1) % size, 0, NULL) != DTRAIN_SUCCESS)
    return fail("sendrecv");
  if (got != (rank + size - 1) % size) return 4;
  if (dtrain_comm_split(comm, rank % 2, rank, &half) != DTRAIN_SUCCESS) return fail("split");
  dtrain_comm_rank(half, &hrank);
  dtrain_comm_size(half, &hsize);
  if (hrank != rank / 2 || hsize != (size - rank % 2 + 1) / 2) return 5;
  dtrain_comm_destroy(half);
  printf("consumer_c rank %d ok %s\n", rank, dtrain_version());
  return dtrain_comm_destroy(comm) == DTRAIN_SUCCESS ? 0 : 1;
}
