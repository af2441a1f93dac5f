#ifndef DTRAIN_COMMON_EXIT_CODES_H
#define DTRAIN_COMMON_EXIT_CODES_H
/* Exit statuses of the dtrain binary, in C so that the C helper (agent/src/shim.c) and the C++
 * code share one table; exit_codes.hpp gives the same values C++ names. man/dtrain.1 (EXIT STATUS)
 * lists them. A failed job exits with its root-cause worker's own status (1..125, or 128+N for
 * signal N), so the codes dtrain itself chooses sit where workers rarely exit on their own. */
#define DTRAIN_EXIT_OK 0
#define DTRAIN_EXIT_USAGE 2            /* bad flags, bad job spec, bad environment */
#define DTRAIN_EXIT_NODE_LOST 69       /* another node's agent went silent (EX_UNAVAILABLE) */
#define DTRAIN_EXIT_RESOURCE 71        /* a local resource ran out or is taken: disk full, open files, address in use (EX_OSERR) */
#define DTRAIN_EXIT_HANG 70            /* a worker waited output.hang_timeout_s in one collective */
#define DTRAIN_EXIT_RDZV_TIMEOUT 75    /* rendezvous join or exit barrier timed out (EX_TEMPFAIL) */
#define DTRAIN_EXIT_AUTH_REFUSED 77    /* the rendezvous refused our token or run id (EX_NOPERM) */
#define DTRAIN_EXIT_MAX_RUNTIME 124    /* max_runtime_s passed (as timeout(1)) */
#define DTRAIN_EXIT_INTERNAL 125       /* dtrain itself failed (I/O, internal error) */
#define DTRAIN_EXIT_NOT_EXECUTABLE 126 /* the command exists but cannot be executed */
#define DTRAIN_EXIT_NOT_FOUND 127      /* the command was not found */
#define DTRAIN_EXIT_SIGNAL_BASE 128    /* + N: a worker (or the agent) ended by signal N */
#define DTRAIN_EXIT_INTERRUPTED 130    /* SIGINT to the agent */
#define DTRAIN_EXIT_TERMINATED 143     /* SIGTERM to the agent */
#endif
