#pragma once
// The guardian: a helper process (shim.c, `guard`) in its own session that SIGKILLs every worker
// group it was told of, their members' descendants, and every process carrying the agent's
// DTRAIN_AGENT_ID in its environment, once its stdin reaches EOF, which happens when the agent
// closes it at the end or when the agent dies, even by SIGKILL. So grandchildren of workers never
// outlive the agent, even those that left the worker's group and lost their parent. Then it removes
// the workers' shared-memory segments (the DTRAIN_SHM_PREFIX stem), which a worker killed during
// setup would leave in /dev/shm.
#include <uv.h>

#include <fmt/format.h>

#include <string>

#include "dtrain/common/uv_handle.hpp"

namespace dtrain::agent {

class Guardian {
 public:
  // Spawns `exe word` with a pipe for stdin and `stderr_fd` as stderr, and tells it the agent id
  // the workers carry (DTRAIN_AGENT_ID). Throws IoError.
  void start(uv_loop_t* loop, const std::string& exe, const std::string& word, int stderr_fd,
             const std::string& agent_id);
  void watch(long pgid) { send(fmt::format("+{}\n", pgid)); }   // a worker group to kill if the agent dies
  void forget(long pgid) { send(fmt::format("-{}\n", pgid)); }  // the group is gone
  // When it ends, it also removes every /dev/shm entry whose name starts with `prefix`.
  void sweep_at_end(const std::string& prefix) { send(fmt::format("/{}\n", prefix)); }
  // Its process id while it runs (0 before start and once it exited).
  long pid() const { return proc_ ? proc_.get()->pid : 0; }
  // Closes its stdin: it kills what is still listed and exits (the process handle closes itself).
  void release() { in_.close(); }
  // The process handle too (the loop's end, after it ran).
  void close() {
    in_.close();
    proc_.close();
  }

 private:
  void send(std::string line);

  UvHandle<uv_process_t> proc_;
  UvHandle<uv_pipe_t> in_;
};

}  // namespace dtrain::agent
