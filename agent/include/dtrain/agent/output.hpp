#pragma once
// Worker output plumbing: bytes from a pipe -> whole lines -> tagged lines on the terminal.
#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

namespace dtrain::agent {

// Splits a byte stream into lines. A line longer than `max_line` is cut into pieces of that size
// (each forwarded whole), so one worker cannot grow the agent's memory without bound.
class LineSplitter {
 public:
  explicit LineSplitter(std::size_t max_line = 64 * 1024) : max_line_(max_line) {}

  // Calls on_line(std::string_view) for every complete line (without its '\n').
  template <class F>
  void feed(const char* data, std::size_t n, F&& on_line) {
    std::size_t start = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (data[i] != '\n') continue;
      emit(data + start, i - start, on_line);
      start = i + 1;
    }
    if (start < n) {
      partial_.append(data + start, n - start);
      while (partial_.size() >= max_line_) {
        on_line(std::string_view(partial_).substr(0, max_line_));
        partial_.erase(0, max_line_);
      }
    }
  }
  // The final unterminated line, if any.
  template <class F>
  void flush(F&& on_line) {
    if (partial_.empty()) return;
    std::string last;
    last.swap(partial_);
    on_line(std::string_view(last));
  }
  bool has_partial() const { return !partial_.empty(); }

 private:
  template <class F>
  void emit(const char* p, std::size_t n, F& on_line) {
    std::string joined;
    std::string_view line(p, n);
    if (!partial_.empty()) {
      partial_.append(p, n);
      joined.swap(partial_);
      line = joined;
    }
    while (line.size() > max_line_) {
      on_line(line.substr(0, max_line_));
      line.remove_prefix(max_line_);
    }
    on_line(line);
  }

  std::size_t max_line_;
  std::string partial_;
};

// Expands {node} {rank} {local_rank} {stream} in a tag format; other text is kept as is, "{{" and
// "}}" are literal braces. Throws ConfigError naming an unknown field.
std::string format_tag(std::string_view format, int node, int rank, int local_rank,
                       std::string_view stream);
// "2026-12-02T14:02:23.123 " (local time, milliseconds).
std::string timestamp_prefix(std::chrono::system_clock::time_point t);

// Writes all of `data` to fd, waiting (poll) when it is non-blocking and full. Returns false on error.
bool write_all(int fd, std::string_view data);

}  // namespace dtrain::agent
