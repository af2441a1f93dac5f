#pragma once
// The guardian: a helper process (shim.c, `guard`) in its own session that SIGKILLs every worker
// group it was told of, their members' descendants, and every process carrying the agent's
// DTRAIN_AGENT_ID in its environment, once its stdin reaches EOF, which happens when the agent
// closes it at the end or when the agent dies, even by SIGKILL. So grandchildren of workers never
// outlive the agent, even those that left the worker's group and lost their parent. Then it removes
// the workers' shared-memory segments (the DTRAIN_SHM_PREFIX stem), which a worker killed during
// setup would leave in /dev/shm. When the agent ends a job having reaped and swept everything itself
// it says so (all_clear), and the guardian exits at EOF without searching /proc.
//
// It is started detached (spawn.hpp, spawn_detached): not the agent's child, so that a child of the
// agent that is no worker is always a process that left a worker's group (escapees.hpp), and the
// agent learns of its end from its stdout, a pipe (the "life line") whose end reaches EOF when it
// exits. Nothing waits for its exec: a guardian that cannot start says so on the life line.
#include <uv.h>

#include <fmt/format.h>

#include <functional>
#include <string>

#include "dtrain/common/uv_handle.hpp"

namespace dtrain::agent {

class Guardian {
 public:
  // Called on the loop when the guardian could not start (the message names it and why).
  using Failed = std::function<void(const std::string& message)>;

  // Starts `exe word` with a pipe from the agent as stdin, the life line as stdout and `stderr_fd`
  // as stderr, and tells it the agent id the workers carry (DTRAIN_AGENT_ID). Throws IoError.
  void start(uv_loop_t* loop, const std::string& exe, const std::string& word, int stderr_fd,
             const std::string& agent_id, Failed on_failed);
  // Reaps the intermediate process that started it. Call before this process becomes a subreaper.
  void settle();
  void watch(long pgid) { send(fmt::format("+{}\n", pgid)); }   // a worker group to kill if the agent dies
  void forget(long pgid) { send(fmt::format("-{}\n", pgid)); }  // the group is gone
  // When it ends, it also removes every /dev/shm entry whose name starts with `prefix`.
  void sweep_at_end(const std::string& prefix) { send(fmt::format("/{}\n", prefix)); }
  // When it ends, it also removes this temporary folder of the agent with its contents.
  void remove_at_end(const std::string& folder) { send(fmt::format("#{}\n", folder)); }
  // Nothing of the job is left: the agent reaped every worker and every process that left their
  // groups, and removed their segments and its temporary folders; at EOF the guardian exits at once.
  void all_clear() { send(".\n"); }
  // Closes its stdin: it kills what is still listed and exits; the loop runs until it did.
  void release() { in_.close(); }
  // Stops watching its life line, so the loop does not wait for its end (after all_clear and
  // release: it has nothing left to do but exit).
  void forsake() { life_.close(); }
  // Both pipes (the loop's end, after it ran).
  void close() {
    in_.close();
    life_.close();
  }

  // libuv callback
  void on_life(ssize_t nread);
  char* life_buffer() { return life_buf_; }

 private:
  void send(std::string line);
  void spawn(const std::string& exe, const std::string& word, int stderr_fd, int in_fd, int life_fd);

  pid_t intermediate_ = 0;
  std::string exe_;
  Failed on_failed_;
  UvHandle<uv_pipe_t> in_, life_;
  char life_buf_[64];
  std::string said_;  // what came on the life line so far
};

}  // namespace dtrain::agent
