// Why a worker ended, as a status and in words (dtrain/agent/worker_exit.hpp).
#include "dtrain/agent/worker_exit.hpp"

#include <fmt/format.h>

#include <cstring>

#include "dtrain/common/exit_codes.hpp"

namespace dtrain::agent {

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", sig);
}

int WorkerExit::status() const {
  if (signal != 0) return exit_code::signal_base + signal;
  return exit_code;
}

std::string WorkerExit::describe() const {
  if (!hang.empty()) return hang_state.empty() ? "hung: " + hang : fmt::format("hung (state {}): {}", hang_state, hang);
  if (exec_errno != 0)
    return fmt::format("could not {} ({}), exit code {}",
                       workdir_error ? "enter the workdir" : cpus_error ? "bind to its CPUs" : "execute the command",
                       std::strerror(exec_errno), exit_code);
  if (signal != 0) return fmt::format("killed by {} ({})", signal_name(signal), signal);
  return fmt::format("exit code {}", exit_code);
}

}  // namespace dtrain::agent
