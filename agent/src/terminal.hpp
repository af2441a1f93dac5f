#pragma once
// The agent's terminal: the workers' tagged lines (buffered, written at line boundaries), the
// agent's own lines, and the progress line (live on a terminal: redrawn in place; else one line
// per change when forced on). None of them ever cuts into another.
#include <functional>
#include <string>
#include <string_view>

#include "dtrain/agent/job_state.hpp"

namespace dtrain::agent {

// What the progress line shows.
struct ProgressFacts {
  JobState state = JobState::starting;
  int restarts = 0;
  int max_restarts = 0;
  int live = 0;              // local workers running
  int local_total = 0;       // local workers of a generation
  bool waiting_for_go = false;
};
// "3/4 workers running (restart 1/3)", ...; "" when there is nothing to show (done).
std::string progress_text(const ProgressFacts& f);

class Terminal {
 public:
  // progress_mode: 1 always, 0 never, -1 when stderr is a terminal
  Terminal(int stdout_fd, int stderr_fd, int progress_mode);

  // Where the progress line's text comes from (progress_text of the agent's current facts).
  void set_progress_source(std::function<std::string()> source) { source_ = std::move(source); }

  // One whole line of the job's output (prefix, tag, text), written at the next flush().
  void line(bool is_err, std::string_view prefix, std::string_view tag, std::string_view text) {
    std::string& b = is_err ? err_buf_ : out_buf_;
    b += prefix;
    b += tag;
    b += text;
    b += '\n';
  }
  void flush();
  // One line of the agent's own, on stderr.
  void say(std::string_view line);
  void update_progress();
  void clear_progress();
  bool progress_on() const { return progress_on_; }

 private:
  void set_progress(std::string text);

  int stdout_fd_, stderr_fd_;
  bool progress_tty_ = false, progress_on_ = false, progress_shown_ = false;
  std::string progress_text_;
  std::string out_buf_, err_buf_;
  std::function<std::string()> source_;
};

}  // namespace dtrain::agent
