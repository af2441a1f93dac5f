// The agent's children, reaped on SIGCHLD (reaper.hpp).
#include "reaper.hpp"

#include <sys/wait.h>

#include <cerrno>
#include <csignal>
#include <vector>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/log.hpp"

namespace dtrain::agent {

void Reaper::start(uv_loop_t* loop, bool reap_all) {
  reap_all_ = reap_all;
  int rc = sig_.init([&](uv_signal_t* s) { return uv_signal_init(loop, s); }, this);
  if (rc == 0)
    rc = uv_signal_start(sig_.get(), [](uv_signal_t* s, int) noexcept {
      if (auto* self = static_cast<Reaper*>(s->data)) self->reap();
    }, SIGCHLD);
  if (rc < 0) throw IoError(fmt::format("cannot watch SIGCHLD: {}", uv_strerror(rc)));
  keep_loop_alive();
}

void Reaper::watch(pid_t pid, Exited on_exit) {
  watched_[pid] = std::move(on_exit);
  keep_loop_alive();
}

void Reaper::keep_loop_alive() {
  if (!sig_) return;
  if (watched_.empty()) uv_unref(sig_.handle());
  else uv_ref(sig_.handle());
}

void Reaper::reap() {
  int status = 0;
  if (reap_all_) {
    for (pid_t pid; (pid = ::waitpid(-1, &status, WNOHANG)) > 0;) exited(pid, status);
  } else {
    std::vector<pid_t> pids;
    for (const auto& [pid, cb] : watched_) pids.push_back(pid);
    for (pid_t pid : pids)
      if (::waitpid(pid, &status, WNOHANG) == pid) exited(pid, status);
  }
  keep_loop_alive();
}

void Reaper::exited(pid_t pid, int status) {
  auto it = watched_.find(pid);
  if (it == watched_.end()) {
    DTRAIN_DEBUG(agent, "reaped pid {}, which had left its worker's process group", pid);
    return;
  }
  Exited cb = std::move(it->second);
  watched_.erase(it);
  try {
    cb(status);
  } catch (const std::exception& e) {
    DTRAIN_ERROR(agent, "after reaping pid {}: {}", pid, e.what());
  }
}

}  // namespace dtrain::agent
