#pragma once
// wait_until: a test's wait on a state that nothing announces (a run's status, a key in a store, a
// line in a log, a thread asleep in a blocking call), with a deadline, so that a test waits for
// what it means to wait for rather than for a guess of how long that takes.
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
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

// True when thread `tid` of this process sleeps in the kernel (state S: in a poll, a futex wait): a
// thread that has said it is about to make a blocking call (its ::gettid()) is then waiting in it.
inline bool blocked(pid_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  std::size_t name_end = stat.rfind(')');  // "tid (name) S ...": the name may hold anything
  return name_end != std::string::npos && name_end + 2 < stat.size() && stat[name_end + 2] == 'S';
}

}  // namespace rt
