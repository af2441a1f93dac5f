#pragma once
// Exit statuses of the dtrain binary; man/dtrain.1 (EXIT STATUS) lists the same table.
// A failed job exits with its root-cause worker's own status (1..125, or 128+N for signal N),
// so the codes dtrain itself chooses sit where workers rarely exit on their own.
namespace dtrain::exit_code {
inline constexpr int ok = 0;
inline constexpr int usage = 2;            // bad flags, bad job spec, bad environment
inline constexpr int node_lost = 69;       // another node's agent went silent (EX_UNAVAILABLE)
inline constexpr int rdzv_timeout = 75;    // rendezvous join or exit barrier timed out (EX_TEMPFAIL)
inline constexpr int auth_refused = 77;    // the rendezvous refused our token or run id (EX_NOPERM)
inline constexpr int max_runtime = 124;    // max_runtime_s passed (as timeout(1))
inline constexpr int internal = 125;       // dtrain itself failed (I/O, internal error)
inline constexpr int not_executable = 126; // the command exists but cannot be executed
inline constexpr int not_found = 127;      // the command was not found
inline constexpr int signal_base = 128;    // + N: a worker (or the agent) ended by signal N
inline constexpr int interrupted = 130;    // SIGINT to the agent
inline constexpr int terminated = 143;     // SIGTERM to the agent
}  // namespace dtrain::exit_code
