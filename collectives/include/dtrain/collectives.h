/* dtrain collectives: the C ABI that training workers link to (libdtrain_collectives.so).
 * Host buffers go to dtrain's CPU engine (shared memory within a node, TCP across nodes); device
 * buffers go to NCCL when the library was built with it. Every function returns a status; the
 * thread-local dtrain_last_error() says what went wrong in words. */
#ifndef DTRAIN_COLLECTIVES_H
#define DTRAIN_COLLECTIVES_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define DTRAIN_API __attribute__((visibility("default")))
#else
#define DTRAIN_API
#endif

typedef struct dtrain_comm* dtrain_comm_t;

/* The enums are int-sized in C; in C++ their underlying type is int, so any int a C caller passes
 * is a value of the type, and the library can refuse it as an invalid argument. */
#ifdef __cplusplus
#define DTRAIN_ENUM_BASE : int
#else
#define DTRAIN_ENUM_BASE
#endif

typedef enum DTRAIN_ENUM_BASE {
  DTRAIN_SUCCESS = 0,
  DTRAIN_ERR_INVALID_ARGUMENT = 1, /* bad pointer, count, dtype, op or root */
  DTRAIN_ERR_CONFIG = 2,           /* missing/bad environment or init parameters */
  DTRAIN_ERR_TIMEOUT = 3,          /* a deadline passed; the error names the missing ranks */
  DTRAIN_ERR_PEER = 4,             /* a peer rank failed or its connection broke */
  DTRAIN_ERR_MISMATCH = 5,         /* ranks called with different count/dtype/op/root */
  DTRAIN_ERR_UNSUPPORTED = 6,      /* e.g. a device buffer in a build without NCCL */
  DTRAIN_ERR_SYSTEM = 7,           /* out of memory, /dev/shm full, socket errors */
  DTRAIN_ERR_NCCL = 8,             /* NCCL returned an error */
  DTRAIN_ERR_CUDA = 9,             /* the CUDA runtime returned an error */
  DTRAIN_ERR_AUTH = 10,            /* the rendezvous store refused the token */
  DTRAIN_ERR_ABORTED = 11,         /* the communicator failed earlier; destroy it */
  DTRAIN_ERR_INTERNAL = 12
} dtrain_status_t;

typedef enum DTRAIN_ENUM_BASE {
  DTRAIN_INT8, DTRAIN_UINT8, DTRAIN_INT32, DTRAIN_INT64,
  DTRAIN_FLOAT16, DTRAIN_BFLOAT16, DTRAIN_FLOAT32, DTRAIN_FLOAT64
} dtrain_dtype_t;

typedef enum DTRAIN_ENUM_BASE { DTRAIN_SUM, DTRAIN_PROD, DTRAIN_MIN, DTRAIN_MAX, DTRAIN_AVG } dtrain_op_t;

/* Library version, e.g. "0.1.0". */
DTRAIN_API const char* dtrain_version(void);

/* Init from the environment `dtrain launch` sets (RANK, WORLD_SIZE, DTRAIN_STORE_ADDR, ...). */
DTRAIN_API dtrain_status_t dtrain_comm_init_from_env(dtrain_comm_t* comm);

/* Explicit init for other launchers and tests. */
typedef struct {
  int rank;
  int size;
  int local_rank;         /* -1: same as rank when local_size == size */
  int local_size;         /* ranks on this node; -1: all ranks are on one node */
  const char* store_host; /* rendezvous store */
  int store_port;
  const char* token;      /* shared token, NULL or "" for none */
  const char* run_id;
  int generation;         /* restart generation */
  double timeout_s;       /* per-collective deadline; <= 0: DTRAIN_COLL_TIMEOUT_S */
  const char* transport;  /* NULL/"auto" or "tcp" */
} dtrain_init_options_t;
DTRAIN_API void dtrain_init_options_default(dtrain_init_options_t* options);
DTRAIN_API dtrain_status_t dtrain_comm_init(const dtrain_init_options_t* options, dtrain_comm_t* comm);

DTRAIN_API dtrain_status_t dtrain_comm_rank(dtrain_comm_t comm, int* rank);
DTRAIN_API dtrain_status_t dtrain_comm_size(dtrain_comm_t comm, int* size);

DTRAIN_API dtrain_status_t dtrain_allreduce(dtrain_comm_t comm, const void* sendbuf, void* recvbuf,
                                            size_t count, dtrain_dtype_t dtype, dtrain_op_t op,
                                            void* stream);
DTRAIN_API dtrain_status_t dtrain_broadcast(dtrain_comm_t comm, const void* sendbuf, void* recvbuf,
                                            size_t count, dtrain_dtype_t dtype, int root, void* stream);
DTRAIN_API dtrain_status_t dtrain_allgather(dtrain_comm_t comm, const void* sendbuf, void* recvbuf,
                                            size_t sendcount, dtrain_dtype_t dtype, void* stream);
DTRAIN_API dtrain_status_t dtrain_reduce_scatter(dtrain_comm_t comm, const void* sendbuf,
                                                 void* recvbuf, size_t recvcount,
                                                 dtrain_dtype_t dtype, dtrain_op_t op, void* stream);
DTRAIN_API dtrain_status_t dtrain_barrier(dtrain_comm_t comm);
DTRAIN_API dtrain_status_t dtrain_comm_destroy(dtrain_comm_t comm);

DTRAIN_API const char* dtrain_status_string(dtrain_status_t status);
DTRAIN_API const char* dtrain_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* DTRAIN_COLLECTIVES_H */
