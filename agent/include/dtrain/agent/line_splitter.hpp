#pragma once
// A worker's output stream as lines: bytes from a pipe -> whole lines (cut at a limit).
#include <cstddef>
#include <string>
#include <string_view>

namespace dtrain::agent {

// Splits a byte stream into lines. A line longer than `max_line` is cut into pieces of that size
// (each forwarded whole, flagged as cut so that the reader can mark it), so one worker cannot grow
// the agent's memory without bound, whatever bytes it writes (NULs, no newline at all).
class LineSplitter {
 public:
  static constexpr std::size_t kDefaultMaxLine = 64 * 1024;
  explicit LineSplitter(std::size_t max_line = kDefaultMaxLine) : max_line_(max_line) {}

  // Calls on_line(std::string_view text, bool cut) for every complete line (without its '\n');
  // `cut`: the line goes on in the next call (it was longer than max_line).
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
        on_line(std::string_view(partial_).substr(0, max_line_), true);
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
    on_line(std::string_view(last), false);
  }
  bool has_partial() const { return !partial_.empty(); }
  std::size_t max_line() const { return max_line_; }

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
      on_line(line.substr(0, max_line_), true);
      line.remove_prefix(max_line_);
    }
    on_line(line, false);
  }

  std::size_t max_line_;
  std::string partial_;
};

// What ends a piece of a line cut by LineSplitter: " [dtrain: line over 65536 bytes, cut here; ...]".
inline std::string cut_mark(std::size_t max_line) {
  return " [dtrain: line over " + std::to_string(max_line) + " bytes, cut here; it goes on in the next line]";
}

}  // namespace dtrain::agent
