#pragma once
// The agent's one libuv loop, and the timers and signal watchers that live on it. What a callback
// throws never reaches libuv: it goes to the loop's failure handler (the agent stops its job with
// it). Handles are owned RAII (dtrain/common/uv_handle.hpp): closing one hands it to the loop,
// which frees it on its next turn; close() runs the loop until every handle is gone.
//
//   EventLoop loop;
//   loop.open([](const std::exception& e) { ... });
//   Timer grace;
//   grace.open(loop, [] { ... });
//   grace.start(2.5);                 // once, in 2.5 s (every(1.0): each second)
//   loop.run();                       // until no active handle is left
//   grace.close();
//   loop.close();
#include <uv.h>

#include <cstdint>
#include <exception>
#include <functional>
#include <vector>

#include "dtrain/common/uv_handle.hpp"

namespace dtrain::agent {

// Seconds as a timer's milliseconds: rounded, never negative.
inline std::uint64_t to_ms(double s) { return s <= 0 ? 0 : static_cast<std::uint64_t>(s * 1000.0 + 0.5); }

class EventLoop {
 public:
  using Failed = std::function<void(const std::exception&)>;

  EventLoop() = default;
  ~EventLoop();  // close() when open
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Creates the loop; what callbacks throw goes to `failed`. Throws IoError.
  void open(Failed failed);
  bool is_open() const { return open_; }
  uv_loop_t* get() { return &loop_; }
  // Runs until no active handle is left (or uv_stop).
  void run();
  // Runs the loop until every closed handle is freed, then closes it. False when a handle was
  // still open (logged: it would be a leak). Nothing once closed.
  bool close();

  // Runs `f` (a callback's body) and hands what it throws to the failure handler.
  template <class F>
  void guarded(F&& f) noexcept {
    try {
      f();
    } catch (const std::exception& e) {
      fail(e);
    } catch (...) {
      fail_unknown();
    }
  }

 private:
  void fail(const std::exception& e) noexcept;
  void fail_unknown() noexcept;

  uv_loop_t loop_{};
  bool open_ = false;
  Failed failed_;
};

// A timer on the loop: `fire` runs on the loop thread each time it is due.
class Timer {
 public:
  Timer() = default;
  Timer(const Timer&) = delete;  // the handle points back at it
  Timer& operator=(const Timer&) = delete;

  // Throws IoError.
  void open(EventLoop& loop, std::function<void()> fire);
  void start(double seconds);  // once, `seconds` from now (restarts a started one)
  void every(double seconds);  // `seconds` from now, then every `seconds`
  void stop();
  bool active() const;
  void close() { h_.close(); }

  void fired() noexcept;  // libuv callback

 private:
  EventLoop* loop_ = nullptr;
  std::function<void()> fire_;
  UvHandle<uv_timer_t> h_;
};

// Watches signals on the loop: `on_signal(sig)` runs on the loop thread for each one that arrives
// (libuv's signal handling: the process-wide disposition is libuv's while watched).
class SignalWatch {
 public:
  SignalWatch() = default;
  SignalWatch(const SignalWatch&) = delete;  // the handles point back at it
  SignalWatch& operator=(const SignalWatch&) = delete;

  // Throws IoError.
  void open(EventLoop& loop, const std::vector<int>& signals, std::function<void(int)> on_signal);
  void close();

 private:
  EventLoop* loop_ = nullptr;
  std::function<void(int)> on_signal_;
  std::vector<UvHandle<uv_signal_t>> h_;
};

}  // namespace dtrain::agent
