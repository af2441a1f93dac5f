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
  DTRAIN_ERR_MISMATCH = 5,         /* ranks called with different count/dtype/op/root, or a message
                                      did not match its receive (tag/count/dtype) */
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

/* ---- Since 0.2 (version node DTRAIN_0.2): groups and point-to-point ---- */

/* dtrain_comm_split's color for a rank that joins no new communicator (*out becomes NULL); any
 * negative color means the same. */
#define DTRAIN_UNDEFINED (-1)
/* A peer of dtrain_sendrecv that skips that direction (MPI_PROC_NULL). */
#define DTRAIN_PROC_NULL (-2)

/* The groups of a parallel layout (dtrain-job(5) `parallel`, the DTRAIN_TP/PP/DP_* environment). */
typedef enum DTRAIN_ENUM_BASE {
  DTRAIN_GROUP_TENSOR = 0,   /* the ranks that hold the shards of one pipeline stage of one replica */
  DTRAIN_GROUP_PIPELINE = 1, /* the stages of one tensor shard of one replica */
  DTRAIN_GROUP_DATA = 2      /* the replicas of one shard of one stage */
} dtrain_group_kind_t;

/* MPI_Comm_split: collective over comm. The ranks that pass the same color >= 0 get a new
 * communicator, ranked by key, ties by their rank in comm; DTRAIN_UNDEFINED gives *out = NULL. */
DTRAIN_API dtrain_status_t dtrain_comm_split(dtrain_comm_t comm, int color, int key, dtrain_comm_t* out);
/* The calling rank's tensor, pipeline or data group from the layout `dtrain launch` puts in the
 * environment; its rank is this rank's coordinate of that kind. Collective over the world: every
 * rank calls it with the same kinds in the same order. */
DTRAIN_API dtrain_status_t dtrain_comm_init_group_from_env(dtrain_group_kind_t kind, dtrain_comm_t* out);

/* Blocking, tagged point-to-point. The n-th send from rank a to rank b is matched with the n-th recv
 * on b from a; their tag, count and dtype must agree (DTRAIN_ERR_MISMATCH otherwise). A send returns
 * once its message is handed to the engine (at once for small messages), a recv once the data is in
 * buf. See dtrain-collectives(3), POINT-TO-POINT, for what may deadlock. */
DTRAIN_API dtrain_status_t dtrain_send(dtrain_comm_t comm, const void* buf, size_t count, dtrain_dtype_t dtype,
                                       int peer, int tag, void* stream);
DTRAIN_API dtrain_status_t dtrain_recv(dtrain_comm_t comm, void* buf, size_t count, dtrain_dtype_t dtype,
                                       int peer, int tag, void* stream);
/* A send to dest and a recv from source progressing together (MPI_Sendrecv): never deadlocks on the
 * other direction. Either peer may be DTRAIN_PROC_NULL. */
DTRAIN_API dtrain_status_t dtrain_sendrecv(dtrain_comm_t comm, const void* sendbuf, size_t sendcount,
                                           dtrain_dtype_t senddtype, int dest, int sendtag, void* recvbuf,
                                           size_t recvcount, dtrain_dtype_t recvdtype, int source, int recvtag,
                                           void* stream);

#ifdef __cplusplus
}
#endif

#endif /* DTRAIN_COLLECTIVES_H */
