#pragma once
// JoinCancel: Membership::cancel_join for both backends. Once cancelled (any thread), the join in
// progress and every later one throws Cancelled promptly: a join checks it between its steps, hands
// connect_store() its Canceller (connect retries, the handshake), registers what it blocks on (the
// join's connection, the etcd watch) for cancel() to close, and waits between retries on it. An
// established membership is untouched.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "dtrain/rendezvous/store/client.hpp"

namespace dtrain::rdzv {

class JoinCancel {
 public:
  JoinCancel();  // IoError when no eventfd can be made (Canceller)
  JoinCancel(const JoinCancel&) = delete;
  JoinCancel& operator=(const JoinCancel&) = delete;

  void cancel();  // any thread, idempotent
  // Throws Cancelled ("joining the rendezvous at <where>: cancelled") once cancelled.
  void check(const std::string& where) const;
  // For ClientOptions::cancel: raised by cancel().
  const std::shared_ptr<Canceller>& canceller() const { return canceller_; }
  // Waits up to `t`; true when cancelled (at once, or during the wait).
  bool wait_for(std::chrono::milliseconds t);

  // While a Closing lives, cancel() calls its `close` (once, under the lock: it must not block or
  // call back). Registered after a cancel(), it is not called: check() after registering tells.
  class Closing {
   public:
    ~Closing();
    Closing(const Closing&) = delete;
    Closing& operator=(const Closing&) = delete;

   private:
    friend class JoinCancel;
    explicit Closing(JoinCancel& c) : c_(c) {}
    JoinCancel& c_;
  };
  [[nodiscard]] Closing closing(std::function<void()> close);

 private:
  std::shared_ptr<Canceller> canceller_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool cancelled_ = false;
  std::function<void()> close_;  // what the join in progress blocks on
};

}  // namespace dtrain::rdzv
