/* Sums the ranks with dtrain_allreduce and checks the result. */
#include <dtrain/collectives.h>
#include <stdio.h>

int main(void) {
  dtrain_comm_t comm;
  int rank, size;
  if (dtrain_comm_init_from_env(&comm) != DTRAIN_SUCCESS) {
    fprintf(stderr, "init: %s\n", dtrain_last_error());
    return 1;
  }
  dtrain_comm_rank(comm, &rank);
  dtrain_comm_size(comm, &size);
  long long x = rank;
  if (dtrain_allreduce(comm, &x, &x, 1, DTRAIN_INT64, DTRAIN_SUM, NULL) != DTRAIN_SUCCESS) {
    fprintf(stderr, "allreduce: %s\n", dtrain_last_error());
    return 1;
  }
  if (x != (long long)size * (size - 1) / 2) return 3;
  printf("consumer_c rank %d ok %s\n", rank, dtrain_version());
  return dtrain_comm_destroy(comm) == DTRAIN_SUCCESS ? 0 : 1;
}
