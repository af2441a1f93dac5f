#pragma once
// The watch over this node's ranks while they run: once a second it reads their progress pages
// (progress_board.hpp), diagnoses them (hang.hpp: where each rank is, which ones dtrain cannot see
// into), publishes that text (AgentHooks::on_progress: `dtrain status --rdzv` shows it), and reports
// a rank that waited in one collective for output.hang_timeout_s as a hang. This is where a
// diagnosis that needs more than the pages (the ranks' own stacks, who keeps the others waiting)
// belongs. tests/agent/test_progress_watch.cpp.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "event_loop.hpp"
#include "progress_board.hpp"

namespace dtrain::agent {

class ProgressWatch {
 public:
  // A hang: why the job stops ("hang: no progress for 31 s: ... (output.hang_timeout_s 30)") and
  // where each rank of this node was.
  struct Hang {
    std::string reason;
    std::vector<std::string> lines;
  };
  using Publish = std::function<void(const std::string& text)>;
  using Hung = std::function<void(const Hang& hang)>;

  // `hang_timeout_s` unset: no hang is reported (a rank is still called stuck after kStuckAfterS in
  // what is published); `publish` empty: nothing is published.
  ProgressWatch(const ProgressBoard& board, std::optional<double> hang_timeout_s, Publish publish, Hung hung)
      : board_(board), hang_timeout_s_(hang_timeout_s), publish_(std::move(publish)), hung_(std::move(hung)) {}

  // Throws IoError.
  void open(EventLoop& loop);
  // The workers run (every second a check), or no longer do (none).
  void running(bool yes);
  void close() { timer_.close(); }

  // One check of the pages at `now_ns` (CLOCK_MONOTONIC, the pages' clock): what the timer does.
  void check(std::int64_t now_ns);

 private:
  const ProgressBoard& board_;
  std::optional<double> hang_timeout_s_;
  Publish publish_;
  Hung hung_;
  Timer timer_;
};

}  // namespace dtrain::agent
