#pragma once
// The lines the server logs about peers it drops or refuses, rate-limited, pure: a flood of bad
// connections cannot flood the log. Up to kPerSecond lines a second are shown one by one; the rest
// are counted and summed up in one line once the second is over (with the last one's text).
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace dtrain::rdzv {

class DropLog {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr int kPerSecond = 20;

  // True when `line` may be logged now; otherwise it is counted for the summary.
  bool admit(Clock::time_point now, std::string_view line) {
    if (hidden_ == 0 && now - window_ >= std::chrono::seconds(1)) {
      window_ = now;
      shown_ = 0;
    }
    if (shown_ < kPerSecond) {
      ++shown_;
      ++total_;
      return true;
    }
    ++hidden_;
    ++total_;
    last_.assign(line.substr(0, 512));
    return false;
  }

  // Once the second is over: "N more ... not shown one by one (last: ...)" for the lines held back.
  std::optional<std::string> summary(Clock::time_point now) {
    if (hidden_ == 0 || now - window_ < std::chrono::seconds(1)) return std::nullopt;
    double secs = std::chrono::duration<double>(now - window_).count();
    std::string text = fmt::format("{} more peers dropped or refused in the last {:.1f} s, not shown one by one (last: {})",
                                   hidden_, secs, last_);
    hidden_ = 0;
    shown_ = 0;
    window_ = now;
    return text;
  }

  // Every line seen, shown or not.
  std::size_t total() const { return total_; }

 private:
  Clock::time_point window_{};
  int shown_ = 0;
  std::size_t hidden_ = 0, total_ = 0;
  std::string last_;
};

}  // namespace dtrain::rdzv
