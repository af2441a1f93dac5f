#pragma once
// EventWatch: the built-in session's watcher. A connection of its own blocks in WATCH for the job
// events after the last one delivered, so that an event reaches every agent at once; each goes to
// JobEvents. A broken connection is the rendezvous lost (delivered to JobEvents as such, once), and
// the thread ends. It keeps running through the exit barrier, where a failure or a loss elsewhere
// must end the wait.
//
// Threading: start() and stop() belong to the session's controlling thread.
#include <atomic>
#include <memory>
#include <thread>

#include "dtrain/rendezvous/store/client.hpp"
#include "dtrain/rendezvous/membership/job_events.hpp"

namespace dtrain::rdzv {

class EventWatch {
 public:
  explicit EventWatch(JobEvents& events) : events_(events) {}
  ~EventWatch() { stop(); }
  EventWatch(const EventWatch&) = delete;
  EventWatch& operator=(const EventWatch&) = delete;

  // Connects (connect_store's errors) and starts watching.
  void start(const ClientOptions& co);
  // Idempotent: closes the connection (a WATCH in flight ends) and joins the thread.
  void stop();

 private:
  void loop();

  JobEvents& events_;
  std::unique_ptr<TcpStore> conn_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace dtrain::rdzv
