#pragma once
// Hang diagnosis: each worker's collectives library publishes its last call on a progress page
// (dtrain/common/progress_page.hpp) in <run folder>/progress/rank-R; diagnose() says, purely, which
// ranks wait in which collective and for how long, which stopped calling, and whether that is a
// hang (a rank in one call for at least the threshold). The agent uses it for
// output.hang_timeout_s and the final summary; `dtrain status` finds the agents of this machine in
// a small registry and reads their pages. tests/agent/test_hang.cpp.
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "dtrain/common/progress_page.hpp"

namespace dtrain::agent {

struct RankProgress {
  int rank = -1;
  progress::Snapshot page;
  long pid = 0;                       // its process (the page's writer, else the worker): 0 unknown
  char state = 0;                     // its /proc state (R, S, D, T, t, Z, ...): 0 unknown
  std::int64_t stopped_since_ns = 0;  // state T since (as first seen; the pages' clock): 0 not stopped
};

// A rank in one call this long is called stuck when the job sets no output.hang_timeout_s.
inline constexpr double kStuckAfterS = 10;
// A rank stopped by a signal (state T) this long makes no progress: the job hangs on it, whether or
// not output.hang_timeout_s is set (a debugger's stop, state t, is left alone).
inline constexpr double kStoppedAfterS = 2;
// A node whose own ranks all wait (none of its ranks is the one they wait for) reports the hang this
// much after the threshold: the node that has the rank to blame reports it first.
inline constexpr double kBlameWaitS = 3;

// The state letter of a process from /proc/PID/stat; 0 when it is gone or unreadable.
char process_state(long pid);
// "T (stopped)", "S (sleeping)", ...
std::string state_text(char state);

struct Diagnosis {
  bool hung = false;               // a rank has been in one call for at least the threshold
  std::string verdict;             // "no progress for 31 s: ranks 0-2 wait in allreduce #57 (4.0 MiB); rank 3 ..."
  std::vector<std::string> lines;  // one per rank: "rank 0: in allreduce #57 (4.0 MiB) for 31.2 s"
  // Ranks with no collective call on their pages yet (dtrain's collectives and, through dtrain's
  // Python start-up hook, torch.distributed's calls write them; other traffic does not): their
  // Python stacks (stacks.hpp) show where they are.
  std::vector<int> unseen;
  // The rank the others wait for, when this node has it: stopped (state T for kStoppedAfterS), or,
  // once the threshold passed, the rank furthest behind the call the longest waiters are in; -1 none.
  int culprit = -1;
  bool stopped = false;   // the culprit is stopped by a signal: a hang whatever the threshold
  std::string blame;      // "rank 3 (pid 812, state T (stopped)) never reached allreduce #95; rank 2 waits in it"
  double waited_s = 0;    // the longest wait in one call
};

// "ranks 0-3: no collective call on their progress pages yet (...): `dtrain status --stacks` shows
// where they are" ("" when every rank made a call).
std::string unseen_text(const Diagnosis& d);

// `now_ns` on the pages' clock (CLOCK_MONOTONIC); `threshold_s` > 0.
Diagnosis diagnose(const std::vector<RankProgress>& ranks, std::int64_t now_ns, double threshold_s);
// The lines, the unseen ranks' note, then "stuck: <verdict>" when hung: what `dtrain status` shows of a node.
std::string diagnosis_text(const Diagnosis& d);

// The progress pages in a run folder (progress-R files), read now; ranks in order.
std::vector<RankProgress> read_progress(const std::filesystem::path& dir);

// The agents running on this machine for this user, as `dtrain status` lists them: each registers
// its run in ${XDG_RUNTIME_DIR:-${TMPDIR:-/tmp}}/dtrain-UID/runs/PID while it runs.
struct LocalRun {
  pid_t pid = 0;
  std::string run_id;
  int node_rank = 0;
  std::string run_dir;                   // its progress pages are in run_dir/progress
  std::optional<double> hang_timeout_s;  // output.hang_timeout_s
};
std::filesystem::path local_runs_dir();
// Writes the entry of this process (best effort: a warning when it cannot); remove_local_run() at the end.
void add_local_run(const LocalRun& r);
void remove_local_run(pid_t pid);
// The entries whose process is alive (stale ones are removed).
std::vector<LocalRun> local_runs();

// "4.0 MiB", "1000 B"
std::string bytes_text(std::uint64_t bytes);
// "0-2, 5" for sorted ranks
std::string ranks_text(const std::vector<int>& ranks);

}  // namespace dtrain::agent
