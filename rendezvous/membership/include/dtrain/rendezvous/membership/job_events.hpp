#pragma once
// JobEvents: where a membership's job events meet, for both backends (the built-in session's watcher
// and heartbeat threads, the etcd session's watch and lease keeper). Each event is delivered once: a
// numbered one (seq > 0, the rendezvous's order) only if it is later than the last, the one "lost
// the rendezvous" event (seq 0, rendezvous_lost) once per generation. The first fatal event (a
// failure, a node stopped or lost) is the generation's root cause. The agent's callback runs outside
// every lock, one event at a time, in delivery order.
//
// In the exit barrier losing the rendezvous may be expected (the built-in rendezvous's node 0 stops
// it once every node finished): such a loss is then not delivered, only noted, and a root cause that
// comes later runs the barrier's hook (it breaks the barrier's wait).
//
// Threading: every member is thread-safe. Do not call deliver() from the callback or the hook.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>

#include "dtrain/rendezvous/membership/membership.hpp"

namespace dtrain::rdzv {

// The kinds of event that end a generation: "failure", "stopped", "lost" (not "joined").
bool fatal_event(const Event& e);

class JobEvents {
 public:
  // The agent's callback (Membership::start_monitoring); kept across generations.
  void set_handler(EventFn fn);
  // A new generation: no event seen, no root cause, not in the exit barrier.
  void reset();
  // Delivers e, unless it was seen already (or is an expected loss of the rendezvous).
  void deliver(const Event& e);
  // Enters the exit barrier: the root cause so far (then there is nothing to wait for), else nullopt,
  // and from now on a root cause runs `on_root` (once, outside the lock). With `loss_expected`, a
  // loss of the rendezvous is noted instead of delivered.
  std::optional<Event> enter_exit_barrier(std::function<void()> on_root, bool loss_expected);
  // Waits up to `t` for a root cause or a loss of the rendezvous (delivered or noted); the root cause.
  std::optional<Event> wait_root_or_loss(std::chrono::milliseconds t);

  std::optional<Event> root() const;
  // The seq of the last numbered event delivered (0: none): a watch asks for the events after it.
  std::int64_t last_seq() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::int64_t last_seq_ = 0;
  bool lost_seen_ = false;      // a "lost the rendezvous" event came (delivered or noted)
  bool loss_expected_ = false;  // in the exit barrier, where that loss is not news
  std::optional<Event> root_;
  std::function<void()> on_root_;
  EventFn handler_;
  std::mutex deliver_mu_;  // one delivery at a time, so the callback sees events in order
};

}  // namespace dtrain::rdzv
