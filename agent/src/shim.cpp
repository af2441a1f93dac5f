// The two helper processes of the agent, run through the dtrain binary itself because libuv's
// uv_spawn has no hook between fork and exec:
//
//   __exec AGENT_PID -- COMMAND...  sets PR_SET_PDEATHSIG(SIGKILL), checks the agent is still its
//       parent (it may have died before the prctl), then execvp()s the command. The agent started it
//       in a new session (own process group). If exec fails, it writes {pid, errno} to fd 3 (the
//       agent's status pipe; close-on-exec, so a successful exec leaves nothing there) and exits
//       127 (not found) or 126 (not executable).
//   __guard  reads "+PGID\n" / "-PGID\n" lines from stdin (a socket held by the agent). On EOF,
//       which is also what happens when the agent is SIGKILLed, it SIGKILLs every group still
//       listed, so grandchildren of workers die with the agent. Own session, ignores INT/TERM/HUP.
#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "dtrain/agent/agent.hpp"
#include "dtrain/common/exit_codes.hpp"

namespace dtrain::agent {

int exec_shim_main(int argc, char** argv) {
  // argv: dtrain __exec PID -- COMMAND [ARGS...]
  if (argc < 5 || std::strcmp(argv[3], "--") != 0) {
    std::fprintf(stderr, "dtrain __exec: internal helper of dtrain launch, not for direct use\n");
    return exit_code::usage;
  }
  long agent_pid = std::strtol(argv[2], nullptr, 10);
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) _exit(exit_code::internal);
  if (static_cast<long>(::getppid()) != agent_pid) _exit(exit_code::signal_base + SIGKILL);
  ::fcntl(3, F_SETFD, FD_CLOEXEC);
  ::execvp(argv[4], argv + 4);
  int err = errno;
  std::int32_t rec[2] = {static_cast<std::int32_t>(::getpid()), static_cast<std::int32_t>(err)};
  ssize_t n = ::write(3, rec, sizeof rec);
  (void)n;
  _exit(err == ENOENT || err == ENOTDIR ? exit_code::not_found : exit_code::not_executable);
}

int guardian_main(int, char**) {
  std::signal(SIGINT, SIG_IGN);
  std::signal(SIGTERM, SIG_IGN);
  std::signal(SIGHUP, SIG_IGN);
  std::signal(SIGPIPE, SIG_IGN);
  std::set<long> groups;
  std::string line;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(0, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] != '\n') {
        line.push_back(buf[i]);
        continue;
      }
      if (line.size() > 1) {
        long pg = std::strtol(line.c_str() + 1, nullptr, 10);
        if (pg > 1) {
          if (line[0] == '+') groups.insert(pg);
          else groups.erase(pg);
        }
      }
      line.clear();
    }
  }
  for (long pg : groups) ::kill(static_cast<pid_t>(-pg), SIGKILL);
  return 0;
}

}  // namespace dtrain::agent
