#pragma once
// How a local rank waits for its peers: an adaptive spin while they are likely running, then futex
// sleep in slices with a check between them (the abort record, the peers' liveness, the deadline),
// so that many ranks on few cores do not starve each other.
//
// The spin's budget starts at DTRAIN_COLL_SPIN_US and doubles, up to kSpinGrowth times that, each
// time what it waits for comes within it; after a sleep it becomes twice the whole wait when that
// was short (a peer that was itself waking up: spinning through its wake-up next time breaks the
// chain where each rank sleeps in turn and every call pays a futex wake-up) and DTRAIN_COLL_SPIN_US
// when it was long (a peer busy elsewhere: sleep soon, burn less). After kPauseUs of pausing the
// spin yields between polls, so a peer queued on this very core (other work on the machine) gets
// it; with more local ranks than CPUs it yields from the start and never grows.
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>

#include "../../call.hpp"
#include "../../wait.hpp"

namespace dtrain::coll::shm {

class Waiter {
 public:
  static constexpr int kSpinGrowth = 20;  // the budget reaches at most this x DTRAIN_COLL_SPIN_US
  static constexpr int kPauseUs = 50;     // then it yields between polls
  static constexpr std::chrono::milliseconds kSlice{20};  // one sleep between two checks

  // spin_us: DTRAIN_COLL_SPIN_US; oversubscribed: more local ranks than CPUs this process may use.
  Waiter(int spin_us, bool oversubscribed)
      : spin_us_(spin_us), budget_us_(spin_us), oversubscribed_(oversubscribed) {}

  int budget_us() const { return budget_us_; }

  // Spins until ready() or the budget is spent; true when ready() came.
  template <class Ready>
  bool spin(Ready&& ready);
  // Spins, then sleeps on `word` (a futex word that wakers bump, counting themselves in `sleepers`)
  // in slices of kSlice until ready(), calling check() (which throws to end the wait) before each.
  template <class Ready, class Check>
  void wait(std::atomic<std::uint32_t>& word, std::atomic<std::uint32_t>& sleepers, Ready&& ready, Check&& check);
  // The budget after a wait that began at t0 and had to sleep.
  void after_sleep(Clock::time_point t0);

 private:
  int spin_us_;
  int budget_us_;
  bool oversubscribed_;
};

template <class Ready>
bool Waiter::spin(Ready&& ready) {
  const auto start = Clock::now();
  const auto spin_until = start + std::chrono::microseconds(budget_us_);
  const auto yield_from = start + std::chrono::microseconds(kPauseUs);
  bool yielding = oversubscribed_;
  for (;;) {
    for (int i = 0; i < 32; ++i) {
      if (ready()) {
        if (!oversubscribed_) budget_us_ = std::min(budget_us_ * 2, kSpinGrowth * spin_us_);
        return true;
      }
      if (yielding) ::sched_yield();
      else cpu_relax();
    }
    const auto now = Clock::now();
    if (now >= spin_until) return false;
    yielding = yielding || now >= yield_from;
  }
}

template <class Ready, class Check>
void Waiter::wait(std::atomic<std::uint32_t>& word, std::atomic<std::uint32_t>& sleepers, Ready&& ready,
                  Check&& check) {
  if (ready()) return;
  const auto t0 = Clock::now();
  if (spin(ready)) return;
  bool done = false;
  while (!done) {
    check();
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    const std::uint32_t p = word.load(std::memory_order_seq_cst);
    done = ready();
    if (!done) futex_wait(word, p, kSlice);
    sleepers.fetch_sub(1, std::memory_order_seq_cst);
    done = done || ready();
  }
  after_sleep(t0);
}

inline void Waiter::after_sleep(Clock::time_point t0) {
  const auto waited_us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
  const auto max_us = static_cast<std::int64_t>(kSpinGrowth) * spin_us_;
  budget_us_ = oversubscribed_ || waited_us > max_us
                   ? spin_us_
                   : static_cast<int>(std::min(max_us, std::max<std::int64_t>(spin_us_, 2 * waited_us)));
}

}  // namespace dtrain::coll::shm
