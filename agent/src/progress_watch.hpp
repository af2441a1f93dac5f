#pragma once
// The watch over this node's ranks while they run: once a second it reads their progress pages
// (progress_board.hpp) and their processes' states (/proc/PID/stat), diagnoses them (hang.hpp: where
// each rank is, which ones made no call yet, which one the others wait for), publishes that
// text (AgentHooks::on_progress: `dtrain status --rdzv` shows it), and reports a hang: a rank that
// waited in one collective for output.hang_timeout_s, or a rank stopped by a signal for
// kStoppedAfterS. When the rank the others wait for is on this node, the hang names it (culprit);
// when it is not, the report waits kBlameWaitS longer, so that the node that has it speaks first.
// Each check also adds the pages' time inside the collectives to the straggler report
// (straggler.hpp): over the last kStragglerWindowS, written to <run folder>/stragglers for `dtrain
// status` and its headline published with the rest; a warning when one rank of this node keeps the
// others waiting more than output.straggler_share of that window (at most once per kWarnEveryS);
// over the whole generation for the summary. On several nodes this node's figures go to the others
// and theirs come back (share_figures: through the rendezvous's heartbeats), so the report covers
// every node that shared, and says how many. tests/agent/test_progress_watch.cpp.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dtrain/agent/straggler.hpp"
#include "event_loop.hpp"
#include "progress_board.hpp"

namespace dtrain::agent {

class ProgressWatch {
 public:
  // A hang: why the job stops ("hang: no progress for 31 s: ... (output.hang_timeout_s 30)") and
  // where each rank of this node was.
  // where each rank of this node was; the rank the job hangs on when this node has it (culprit -1:
  // none), its state ("T stopped") and where it was ("never reached allreduce #95; rank 2 waits in it").
  struct Hang {
    std::string reason;
    std::vector<std::string> lines;
    int culprit = -1;
    std::string state, blame;
  };
  using Publish = std::function<void(const std::string& text)>;
  using Hung = std::function<void(const Hang& hang)>;
  using PidOf = std::function<long(int rank)>;  // the live worker of a rank, 0 when none
  using Warn = std::function<void(const std::string& line)>;
  static constexpr double kStragglerWindowS = 10;
  static constexpr double kWarnEveryS = 60;

  // `hang_timeout_s` unset: only a stopped rank is a hang (a rank is still called stuck after
  // kStuckAfterS in what is published); `publish` empty: nothing is published; `pid_of` empty: a
  // rank's process is the one its page names.
  ProgressWatch(const ProgressBoard& board, std::optional<double> hang_timeout_s, Publish publish, Hung hung,
                PidOf pid_of = {})
      : board_(board), hang_timeout_s_(hang_timeout_s), publish_(std::move(publish)), hung_(std::move(hung)),
        pid_of_(std::move(pid_of)) {}

  // Throws IoError.
  void open(EventLoop& loop);
  // The workers run (every second a check), or no longer do (none).
  void running(bool yes);
  void close() { timer_.close(); }

  // One check of the pages at `now_ns` (CLOCK_MONOTONIC, the pages' clock): what the timer does.
  void check(std::int64_t now_ns);

  // The straggler warning: `share` of the window (0: none) and where its line goes.
  void warn_stragglers(double share, Warn warn) {
    warn_share_ = share;
    warn_ = std::move(warn);
  }
  // The straggler report over the generation's run so far (its last check): the summary's end.
  std::vector<std::string> straggler_lines() const;
  // The other nodes' figures: `share` sends this node's (straggler::encode), `peers` gives the
  // others' as last received, by node rank; `nodes`: the job's node count.
  using ShareFigures = std::function<void(const std::string& text)>;
  using PeerFigures = std::function<std::map<int, std::string>()>;
  void share_figures(int nodes, ShareFigures share, PeerFigures peers) {
    nodes_ = nodes;
    share_ = std::move(share);
    peers_ = std::move(peers);
  }

 private:
  const ProgressBoard& board_;
  std::optional<double> hang_timeout_s_;
  Publish publish_;
  Hung hung_;
  PidOf pid_of_;
  Timer timer_;
  std::map<int, std::int64_t> stopped_since_;  // ranks seen stopped (state T), since when
  void sample(const std::vector<RankProgress>& ranks, std::int64_t now_ns);
  std::string stragglers(std::int64_t now_ns);  // the window's report: its headline
  void write_report(const std::vector<std::string>& lines) const;
  // This node's figures (window or whole) with those of the other nodes' ranks; counts the nodes in `seen`.
  std::vector<straggler::RankTimes> merged(std::vector<straggler::RankTimes> local, bool window, int& seen) const;
  std::string scope(const std::string& what, int seen) const;  // "the last 10 s, 2 of 2 nodes"

  straggler::Tracker tracker_{kStragglerWindowS};
  double warn_share_ = 0;
  Warn warn_;
  std::optional<std::int64_t> warned_ns_;  // the last warning
  int nodes_ = 1;
  ShareFigures share_;
  PeerFigures peers_;
};

}  // namespace dtrain::agent
