#pragma once
// The guardian: a helper process (shim.c, `guard`) in its own session that SIGKILLs every worker
// group it was told of once its stdin reaches EOF, which happens when the agent closes it at the
// end or when the agent dies, even by SIGKILL. So grandchildren of workers never outlive the agent.
#include <uv.h>

#include <string>

#include "dtrain/common/uv_handle.hpp"

namespace dtrain::agent {

class Guardian {
 public:
  // Spawns `exe word` with a pipe for stdin and `stderr_fd` as stderr. Throws IoError.
  void start(uv_loop_t* loop, const std::string& exe, const std::string& word, int stderr_fd);
  void watch(long pgid) { send('+', pgid); }   // a worker group to kill if the agent dies
  void forget(long pgid) { send('-', pgid); }  // the group is gone
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
  void send(char op, long pgid);

  UvHandle<uv_process_t> proc_;
  UvHandle<uv_pipe_t> in_;
};

}  // namespace dtrain::agent
