#pragma once
// The agent's inbox: events posted from other threads (Agent::post: the multi-node driver's control
// thread) handed to the loop thread in the order they were posted, by a uv_async. What is posted
// before the loop opens waits here and is delivered once it does; what is posted after close() is
// dropped (the job is over).
#include <uv.h>

#include <functional>
#include <mutex>
#include <vector>

#include "dtrain/agent/events.hpp"
#include "dtrain/common/uv_handle.hpp"
#include "event_loop.hpp"

namespace dtrain::agent {

class Inbox {
 public:
  using Deliver = std::function<void(const Event&)>;

  // Delivers each event on the loop thread (what it throws goes to the loop's failure handler).
  // Throws IoError.
  void open(EventLoop& loop, Deliver deliver);
  // Any thread.
  void post(Event e);
  // Loop thread: later posts are dropped.
  void close();

 private:
  void deliver() noexcept;

  std::mutex mu_;
  std::vector<Event> events_;        // under mu_
  bool closed_ = false;              // under mu_
  UvHandle<uv_async_t> async_;       // under mu_ (post() sends on it)
  EventLoop* loop_ = nullptr;
  Deliver deliver_;
};

}  // namespace dtrain::agent
