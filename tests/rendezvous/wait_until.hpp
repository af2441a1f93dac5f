#pragma once
// wait_until: a test's wait on a state that nothing announces (a run's status, a key in a store, a
// line in a log), with a deadline, so that a test waits for what it means to wait for rather than
// for a guess of how long that takes.
#include <chrono>
#include <thread>

namespace rt {

// Asks `pred` every few milliseconds until it holds or `t` has passed; whether it held.
template <class Pred>
bool wait_until(Pred pred, std::chrono::milliseconds t = std::chrono::seconds(30)) {
  auto deadline = std::chrono::steady_clock::now() + t;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace rt
