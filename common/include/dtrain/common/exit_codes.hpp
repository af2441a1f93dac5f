#pragma once
// Exit statuses of the dtrain binary, C++ names for the table in exit_codes.h (shared with the C
// helper, agent/src/shim.c); man/dtrain.1 (EXIT STATUS) lists the same table.
// A failed job exits with its root-cause worker's own status (1..125, or 128+N for signal N),
// so the codes dtrain itself chooses sit where workers rarely exit on their own.
#include "dtrain/common/exit_codes.h"

namespace dtrain::exit_code {
inline constexpr int ok = DTRAIN_EXIT_OK;
inline constexpr int usage = DTRAIN_EXIT_USAGE;                    // bad flags, bad job spec, bad environment
inline constexpr int node_lost = DTRAIN_EXIT_NODE_LOST;            // another node's agent went silent
inline constexpr int resource = DTRAIN_EXIT_RESOURCE;              // disk full, too many open files, address in use
inline constexpr int hang = DTRAIN_EXIT_HANG;                      // no progress for output.hang_timeout_s
inline constexpr int rdzv_timeout = DTRAIN_EXIT_RDZV_TIMEOUT;      // rendezvous join or exit barrier timed out
inline constexpr int auth_refused = DTRAIN_EXIT_AUTH_REFUSED;      // the rendezvous refused our token or run id
inline constexpr int max_runtime = DTRAIN_EXIT_MAX_RUNTIME;        // max_runtime_s passed (as timeout(1))
inline constexpr int internal = DTRAIN_EXIT_INTERNAL;              // dtrain itself failed (I/O, internal error)
inline constexpr int not_executable = DTRAIN_EXIT_NOT_EXECUTABLE;  // the command exists but cannot be executed
inline constexpr int not_found = DTRAIN_EXIT_NOT_FOUND;            // the command was not found
inline constexpr int signal_base = DTRAIN_EXIT_SIGNAL_BASE;        // + N: a worker (or the agent) ended by signal N
inline constexpr int interrupted = DTRAIN_EXIT_INTERRUPTED;        // SIGINT to the agent
inline constexpr int terminated = DTRAIN_EXIT_TERMINATED;          // SIGTERM to the agent
}  // namespace dtrain::exit_code
