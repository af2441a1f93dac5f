#pragma once
// Facts about the machine this process runs on, and the calling thread's signal mask.
#include <pthread.h>
#include <signal.h>

#include <cstddef>
#include <string>

namespace dtrain::sys {

// CPUs this process may run on (its affinity mask), at least 1.
int usable_cpus();

// Raises this process's soft limit of open files to its hard limit (servers and agents hold many
// sockets and pipes) and returns the soft limit now in force.
long raise_fd_limit();

// Every signal blocked on the calling thread while it lives (a thread or a child process made
// meanwhile starts with them all blocked); the previous mask comes back at its end.
class AllSignalsBlocked {
 public:
  AllSignalsBlocked() {
    sigset_t all;
    sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, &old_);
  }
  ~AllSignalsBlocked() { ::pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  AllSignalsBlocked(const AllSignalsBlocked&) = delete;
  AllSignalsBlocked& operator=(const AllSignalsBlocked&) = delete;

 private:
  sigset_t old_;
};

}  // namespace dtrain::sys
