#pragma once
// The agent's children, reaped on SIGCHLD (the processes of spawn.hpp, which libuv does not know).
// Each watched child has a callback that gets its wait status once it is reaped. With `reap_all`
// (the dtrain binary: every child of the process is the agent's) one waitpid(-1) loop reaps
// whatever exited, and a child nobody watches, a process that left its worker's group and was
// re-parented to the agent (escapees.hpp), is reaped too; without it (a process that embeds the
// agent and may have children of its own) only the watched pids are waited for.
// The signal watcher keeps the loop alive while a watched child is left.
#include <uv.h>

#include <functional>
#include <map>

#include "dtrain/common/uv_handle.hpp"

namespace dtrain::agent {

class Reaper {
 public:
  using Exited = std::function<void(int wait_status)>;

  // Throws IoError.
  void start(uv_loop_t* loop, bool reap_all);
  // Call right after the fork, before the loop runs again.
  void watch(pid_t pid, Exited on_exit);
  std::size_t watched() const { return watched_.size(); }
  // Reaps what exited now (also called on every SIGCHLD).
  void reap();
  void close() { sig_.close(); }

 private:
  void exited(pid_t pid, int status);
  void keep_loop_alive();

  bool reap_all_ = false;
  std::map<pid_t, Exited> watched_;
  UvHandle<uv_signal_t> sig_;
};

}  // namespace dtrain::agent
