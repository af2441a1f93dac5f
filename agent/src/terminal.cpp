// The agent's terminal (terminal.hpp).
#include "terminal.hpp"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>

#include "dtrain/agent/write_all.hpp"

namespace dtrain::agent {

namespace {
constexpr std::string_view kEraseLine = "\r\x1b[K";
}

std::string progress_text(const ProgressFacts& f) {
  int max = std::max(f.max_restarts, f.restarts);
  std::string restart = f.restarts > 0 ? fmt::format(" (restart {}/{})", f.restarts, max) : "";
  switch (f.state) {
    case JobState::starting:
      return f.waiting_for_go ? fmt::format("waiting for the other nodes{}", restart)
                              : fmt::format("starting {} worker(s){}", f.local_total, restart);
    case JobState::running: return fmt::format("{}/{} workers running{}", f.live, f.local_total, restart);
    case JobState::stopping: return fmt::format("stopping ({} worker(s) left)", f.live);
    case JobState::restarting: return fmt::format("restarting {}/{}", f.restarts, max);
    case JobState::done: return "";
  }
  return "";
}

Terminal::Terminal(int stdout_fd, int stderr_fd, int progress_mode)
    : stdout_fd_(stdout_fd),
      stderr_fd_(stderr_fd),
      progress_tty_(::isatty(stderr_fd) == 1),
      progress_on_(progress_mode == 1 || (progress_mode == -1 && progress_tty_)) {}

void Terminal::say(std::string_view line) {
  flush();
  bool shown = progress_shown_;
  if (shown) {
    write_all(stderr_fd_, kEraseLine);
    progress_shown_ = false;
  }
  write_all(stderr_fd_, std::string(line) + "\n");
  if (shown) update_progress();
}

void Terminal::flush() {
  if (out_buf_.empty() && err_buf_.empty()) return;
  bool shown = progress_shown_;
  if (shown) {
    write_all(stderr_fd_, kEraseLine);
    progress_shown_ = false;
  }
  if (!out_buf_.empty()) {
    write_all(stdout_fd_, out_buf_);
    out_buf_.clear();
  }
  if (!err_buf_.empty()) {
    write_all(stderr_fd_, err_buf_);
    err_buf_.clear();
  }
  if (shown) set_progress(progress_text_);
}

void Terminal::update_progress() {
  if (!progress_on_ || !source_) return;
  std::string text = source_();
  if (text.empty()) return clear_progress();
  set_progress(std::move(text));
}

void Terminal::set_progress(std::string text) {
  if (!progress_on_) return;
  if (!progress_tty_) {
    if (text != progress_text_ && !text.empty()) write_all(stderr_fd_, "dtrain: " + text + "\n");
    progress_text_ = std::move(text);
    return;
  }
  progress_text_ = std::move(text);
  if (progress_text_.empty()) {
    clear_progress();
    return;
  }
  write_all(stderr_fd_, std::string(kEraseLine) + "dtrain: " + progress_text_);
  progress_shown_ = true;
}

void Terminal::clear_progress() {
  if (progress_shown_) write_all(stderr_fd_, kEraseLine);
  progress_shown_ = false;
}

}  // namespace dtrain::agent
