/* Under `dtrain launch`, against a libdtrain_collectives built without NCCL and the fake driver
 * (fake_libcuda.c): a device buffer is DTRAIN_ERR_UNSUPPORTED "built without NCCL", every later
 * device call (collectives, send, recv, sendrecv, and on a split communicator) returns the same
 * status and message (the failed setup is remembered), and host collectives and point-to-point
 * keep working. Prints "rank R ok" and exits 0, else says what differed and exits 1. */
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
  const int peer = 1 - rank;
  for (int call = 0; call < 6; ++call) {
    switch (call) {
      case 1: st = dtrain_broadcast(comm, dev, dev, 4, DTRAIN_FLOAT32, 0, NULL); break;
      case 3: st = dtrain_send(comm, dev, 4, DTRAIN_FLOAT32, peer, 0, NULL); break;
      case 4: st = dtrain_recv(comm, dev, 4, DTRAIN_FLOAT32, peer, 0, NULL); break;
      case 5: st = dtrain_sendrecv(comm, dev, 2, DTRAIN_FLOAT32, peer, 0, dev + 2, 2, DTRAIN_FLOAT32, peer, 0, NULL); break;
      default: st = dtrain_allreduce(comm, dev, dev, 4, DTRAIN_FLOAT32, DTRAIN_SUM, NULL);
    }
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
  /* Host point-to-point after the refused device ones: nothing of those was sent. */
  float mine = (float)rank, theirs = -1;
  st = dtrain_sendrecv(comm, &mine, 1, DTRAIN_FLOAT32, peer, 0, &theirs, 1, DTRAIN_FLOAT32, peer, 0, NULL);
  if (st != DTRAIN_SUCCESS || theirs != (float)peer) return fail(rank, "host sendrecv after the device errors", st);
  /* A split communicator refuses device buffers the same way (its own NCCL setup fails). */
  dtrain_comm_t half = NULL;
  st = dtrain_comm_split(comm, 0, rank, &half);
  if (st != DTRAIN_SUCCESS) return fail(rank, "split", st);
  st = dtrain_send(half, dev, 4, DTRAIN_FLOAT32, peer, 0, NULL);
  if (st != DTRAIN_ERR_UNSUPPORTED || strstr(dtrain_last_error(), "built without NCCL") == NULL)
    return fail(rank, "device send on a split communicator (want unsupported)", st);
  dtrain_comm_destroy(half);
  dtrain_comm_destroy(comm);
  printf("rank %d ok\n", rank);
  return 0;
}
