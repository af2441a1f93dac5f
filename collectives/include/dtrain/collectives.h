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
  DTRAIN_INT8 = 0, DTRAIN_UINT8 = 1, DTRAIN_INT32 = 2, DTRAIN_INT64 = 3,
  DTRAIN_FLOAT16 = 4, DTRAIN_BFLOAT16 = 5, DTRAIN_FLOAT32 = 6, DTRAIN_FLOAT64 = 7,
  DTRAIN_BOOL = 8,  /* since 0.3: one byte, 0 or 1; sum/max/bor = or, prod/min/band = and, bxor = xor */
  DTRAIN_INT16 = 9  /* since 0.3 */
} dtrain_dtype_t;

/* Reductions. Since 0.3: the bitwise ones (integers and bool only) and premultiplied sums, whose
 * values come from dtrain_redop_create_premul_sum (DTRAIN_PREMUL_SUM itself names the kind and is not
 * an op a call takes). */
typedef enum DTRAIN_ENUM_BASE {
  DTRAIN_SUM = 0, DTRAIN_PROD = 1, DTRAIN_MIN = 2, DTRAIN_MAX = 3, DTRAIN_AVG = 4,
  DTRAIN_BAND = 5, DTRAIN_BOR = 6, DTRAIN_BXOR = 7,
  DTRAIN_PREMUL_SUM = 8
} dtrain_op_t;

/* The library's version as a number: major * 10000 + minor * 100 + patch (0.3.0 = 300). The header's
 * value is what a program was compiled against; dtrain_version_code() what it runs with. */
#define DTRAIN_VERSION_MAJOR 0
#define DTRAIN_VERSION_MINOR 3
#define DTRAIN_VERSION_PATCH 0
#define DTRAIN_VERSION_CODE (DTRAIN_VERSION_MAJOR * 10000 + DTRAIN_VERSION_MINOR * 100 + DTRAIN_VERSION_PATCH)

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
  double timeout_s;       /* per-collective deadline; <= 0: DTRAIN_COLL_TIMEOUT_S; inf: none (NaN refused) */
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

/* ---- Since 0.3 (version node DTRAIN_0.3): what a framework backend needs ---- */

DTRAIN_API int dtrain_version_code(void);

/* A key-value store of the caller's (a framework's own: torch's TCPStore, FileStore, PrefixStore),
 * through which a communicator bootstraps instead of dtrain's rendezvous store. Every callback gets
 * `ctx` first and returns DTRAIN_STORE_OK, DTRAIN_STORE_TIMEOUT (get only) or DTRAIN_STORE_ERROR; on
 * an error it may describe it through `error(error_ctx, message)` (NULL-safe to skip). Keys are
 * NUL-terminated text, values bytes. The callbacks are called from the thread that calls the dtrain
 * function, one at a time per communicator: during init, after a failure (to publish the abort) and
 * when a first device call sets up NCCL; ctx must stay valid until the communicator is destroyed. A
 * callback's error becomes DTRAIN_ERR_PEER, a get's timeout DTRAIN_ERR_TIMEOUT, each with its message
 * in dtrain_last_error().
 *   set          stores value under key (replacing it).
 *   get          waits until key exists, at most timeout_ms, then hands its value to value(value_ctx,
 *                bytes, len) once and returns OK; TIMEOUT when the time passed first.
 *   add          adds delta to the integer stored as decimal text at key (missing = 0), *result = new.
 *   compare_set  sets key to desired when its value equals expected (a missing key matches an empty
 *                expected) and hands the value after the call to value(...).
 *   check        *exists = 1 when key exists, 0 when not, without waiting. */
enum { DTRAIN_STORE_OK = 0, DTRAIN_STORE_TIMEOUT = 1, DTRAIN_STORE_ERROR = 2 };
typedef void (*dtrain_store_value_fn)(void* value_ctx, const void* bytes, size_t len);
typedef void (*dtrain_store_error_fn)(void* error_ctx, const char* message);
typedef struct {
  void* ctx;
  int (*set)(void* ctx, const char* key, const void* value, size_t len, dtrain_store_error_fn error, void* error_ctx);
  int (*get)(void* ctx, const char* key, long long timeout_ms, dtrain_store_value_fn value, void* value_ctx,
             dtrain_store_error_fn error, void* error_ctx);
  int (*add)(void* ctx, const char* key, long long delta, long long* result, dtrain_store_error_fn error,
             void* error_ctx);
  int (*compare_set)(void* ctx, const char* key, const void* expected, size_t expected_len, const void* desired,
                     size_t desired_len, dtrain_store_value_fn value, void* value_ctx, dtrain_store_error_fn error,
                     void* error_ctx);
  int (*check)(void* ctx, const char* key, int* exists, dtrain_store_error_fn error, void* error_ctx);
} dtrain_store_t;

/* An init configuration that grows without breaking the ABI: start from DTRAIN_CONFIG_INITIALIZER
 * (which records the struct's size and the header's version), then set fields. The library reads the
 * fields that fit in struct_size; fields added later are appended. */
typedef struct {
  size_t struct_size;          /* sizeof(dtrain_config_t) as the caller was compiled */
  unsigned int version;        /* DTRAIN_VERSION_CODE as the caller was compiled */
  int rank;                    /* this process's rank in 0 .. size-1 (required) */
  int size;                    /* number of ranks (required) */
  const dtrain_store_t* store; /* bootstrap store (required); the group's own: keys are used as given */
  double timeout_s;            /* per-call deadline; <= 0: DTRAIN_COLL_TIMEOUT_S (default 300); inf or
                                  anything over 1e9: no practical deadline; NaN: refused */
  const char* transport;       /* NULL/"auto" or "tcp" (sockets even within a host) */
  const char* host;            /* this rank's host identity; NULL: the host name and boot id. Ranks with
                                  the same identity share memory; the others are reached over TCP */
  const char* advertise;       /* address peers reach this rank at; NULL: DTRAIN_SOCKET_ADDR, the route
                                  to MASTER_ADDR, else this host name's address */
  const char* name;            /* the group's name in messages, e.g. "world" or "group 2"; NULL: none */
} dtrain_config_t;
#define DTRAIN_CONFIG_INITIALIZER \
  { sizeof(dtrain_config_t), DTRAIN_VERSION_CODE, -1, -1, NULL, 0.0, NULL, NULL, NULL, NULL }

/* A communicator of config->size ranks bootstrapped through config->store: collective over them.
 * Ranks may join in any order; ranks on one host (same `host`, in any numbering) use shared memory,
 * others TCP. A bad config (struct_size below the fields up to `store`, rank/size out of range, a NULL
 * store or callback, an unknown transport) is DTRAIN_ERR_INVALID_ARGUMENT naming the field. */
DTRAIN_API dtrain_status_t dtrain_comm_init_config(const dtrain_config_t* config, dtrain_comm_t* comm);

/* The deadline of each later call on comm (a framework's per-op timeout); <= 0 restores the one the
 * communicator was made with; inf (or anything over 1e9 s) is no practical deadline; NaN is
 * DTRAIN_ERR_INVALID_ARGUMENT. */
DTRAIN_API dtrain_status_t dtrain_comm_set_timeout(dtrain_comm_t comm, double timeout_s);

/* Ends comm's host calls from any thread: the call another thread is making on comm now (it may be
 * waiting for peers) and every later call fail with DTRAIN_ERR_ABORTED and `reason` (NULL: "aborted")
 * in their error text, and peers waiting on this rank fail as after a failure here. The one function
 * that may run while another thread is in a call on comm; not while comm is being destroyed. Device
 * work already on a stream is not stopped (dtrain_comm_destroy releases it). */
DTRAIN_API dtrain_status_t dtrain_comm_abort(dtrain_comm_t comm, const char* reason);

/* A premultiplied sum (ncclRedOpCreatePreMulSum): sum over ranks of scale * x, for the floating
 * dtypes. *op is valid on comm (for allreduce, reduce and reduce_scatter) until destroyed; every
 * rank creates its ops in the same order. */
DTRAIN_API dtrain_status_t dtrain_redop_create_premul_sum(dtrain_comm_t comm, double scale, dtrain_op_t* op);
DTRAIN_API dtrain_status_t dtrain_redop_destroy(dtrain_comm_t comm, dtrain_op_t op);

/* The reduction of every rank's sendbuf into recvbuf on root (recvbuf is not used elsewhere and may
 * be NULL there); in place when sendbuf == recvbuf on the root. */
DTRAIN_API dtrain_status_t dtrain_reduce(dtrain_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                         dtrain_dtype_t dtype, dtrain_op_t op, int root, void* stream);
/* sendcount elements from every rank into root's recvbuf (size x sendcount, in rank order; NULL
 * elsewhere). The root's sendbuf may be recvbuf + root * sendcount (in place). */
DTRAIN_API dtrain_status_t dtrain_gather(dtrain_comm_t comm, const void* sendbuf, void* recvbuf, size_t sendcount,
                                         dtrain_dtype_t dtype, int root, void* stream);
/* Root's sendbuf (size x recvcount; NULL elsewhere) cut in rank order, block r into rank r's recvbuf.
 * The root's recvbuf may be sendbuf + root * recvcount (in place). */
DTRAIN_API dtrain_status_t dtrain_scatter(dtrain_comm_t comm, const void* sendbuf, void* recvbuf, size_t recvcount,
                                          dtrain_dtype_t dtype, int root, void* stream);
/* Block r (count elements) of sendbuf to rank r, whose block `rank` of recvbuf gets it. sendbuf and
 * recvbuf are distinct. */
DTRAIN_API dtrain_status_t dtrain_alltoall(dtrain_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                           dtrain_dtype_t dtype, void* stream);
/* Uneven splits (MPI_Alltoallv): sendcounts[r] elements at sendbuf + sdispls[r] go to rank r, and
 * recvcounts[r] elements from rank r land at recvbuf + rdispls[r] (displacements in elements). Rank
 * a's sendcounts[b] must equal rank b's recvcounts[a] (DTRAIN_ERR_MISMATCH otherwise). */
DTRAIN_API dtrain_status_t dtrain_alltoallv(dtrain_comm_t comm, const void* sendbuf, const size_t* sendcounts,
                                            const size_t* sdispls, void* recvbuf, const size_t* recvcounts,
                                            const size_t* rdispls, dtrain_dtype_t dtype, void* stream);
/* A receive from whichever rank's message with this tag comes first (MPI_ANY_SOURCE); *source gets
 * that rank. Host buffers only. */
DTRAIN_API dtrain_status_t dtrain_recv_any(dtrain_comm_t comm, void* buf, size_t count, dtrain_dtype_t dtype,
                                           int tag, int* source, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* DTRAIN_COLLECTIVES_H */
