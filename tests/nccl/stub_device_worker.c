/* Under `dtrain launch`, against a libdtrain_collectives built without NCCL and the fake driver
 * (fake_libcuda.c): a device buffer is DTRAIN_ERR_UNSUPPORTED "built without NCCL", every later
 * device call returns the same status and message (the failed setup is remembered), and host
 * collectives keep working. Prints "rank R ok" and exits 0, else says what differed and exits 1. */
#include <dtrain/collectives.h>

#include <stdio.h>
#include <string.h>

extern unsigned char fake_device_memory[4096];

static int fail(int rank, const char* what, dtrain_status_t st) {
  fprintf(stderr, "rank %d: %s: status %s (%d): %s\n", rank, what, dtrain_status_string(st), (int)st,
          dtrain_last_error());
  return 1;
}

int main(void) {
  dtrain_comm_t comm = NULL;
  int rank = -1;
  dtrain_status_t st = dtrain_comm_init_from_env(&comm);
  if (st != DTRAIN_SUCCESS) return fail(rank, "init", st);
  dtrain_comm_rank(comm, &rank);
  float* dev = (float*)(void*)fake_device_memory;
  char first[1024];
  for (int call = 0; call < 3; ++call) {
    st = call == 1 ? dtrain_broadcast(comm, dev, dev, 4, DTRAIN_FLOAT32, 0, NULL)
                   : dtrain_allreduce(comm, dev, dev, 4, DTRAIN_FLOAT32, DTRAIN_SUM, NULL);
    if (st != DTRAIN_ERR_UNSUPPORTED) return fail(rank, "device call (want unsupported)", st);
    if (strstr(dtrain_last_error(), "built without NCCL") == NULL) return fail(rank, "device call message", st);
    if (call == 0) snprintf(first, sizeof first, "%s", dtrain_last_error());
    else if (strcmp(first, dtrain_last_error()) != 0) return fail(rank, "a later device call changed the message", st);
  }
  float host[4] = {1, 2, 3, (float)rank};
  st = dtrain_allreduce(comm, host, host, 4, DTRAIN_FLOAT32, DTRAIN_SUM, NULL);
  if (st != DTRAIN_SUCCESS) return fail(rank, "host allreduce after the device errors", st);
  if (host[0] != 2 || host[3] != 1) return fail(rank, "host allreduce result", st);
  st = dtrain_barrier(comm);
  if (st != DTRAIN_SUCCESS) return fail(rank, "barrier", st);
  dtrain_comm_destroy(comm);
  printf("rank %d ok\n", rank);
  return 0;
}
