// Starting a process without waiting for its exec (spawn.hpp).
#include "spawn.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>

#include "dtrain/common/exit_codes.h"

extern char** environ;

namespace dtrain::agent {

namespace {

// ---- in the child: async-signal-safe calls only (the parent may have other threads) ----------

[[noreturn]] void fail(const SpawnRequest& r, SpawnStep step, int err) {
  if (r.status_fd >= 0) {
    SpawnFailure f{static_cast<std::int32_t>(::getpid()), err, step};
    ssize_t n = ::write(r.status_fd, &f, sizeof f);
    (void)n;
  }
  ::_exit(err == ENOENT || err == ENOTDIR ? DTRAIN_EXIT_NOT_FOUND : DTRAIN_EXIT_NOT_EXECUTABLE);
}

// fd moved above 2 (close-on-exec), so that putting the others in place cannot overwrite it.
int above_stdio(int fd) { return fd >= 0 && fd < 3 ? ::fcntl(fd, F_DUPFD_CLOEXEC, 3) : fd; }

[[noreturn]] void child(SpawnRequest r, pid_t parent) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int s = 1; s < 32; ++s)  // the real-time signals belong to libc
    if (s != SIGKILL && s != SIGSTOP) ::sigaction(s, &dfl, nullptr);
  if (::setsid() < 0) fail(r, SpawnStep::setup, errno);
  if (r.die_with_parent) {
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail(r, SpawnStep::setup, errno);
    if (::getppid() != parent) ::_exit(DTRAIN_EXIT_SIGNAL_BASE + SIGKILL);  // it died before the prctl
  }
  r.status_fd = above_stdio(r.status_fd);
  int src[3];
  for (int i = 0; i < 3; ++i) {
    src[i] = r.stdio[i] >= 0 ? r.stdio[i] : ::open("/dev/null", (i == 0 ? O_RDONLY : O_RDWR) | O_CLOEXEC);
    if (src[i] < 0 || (src[i] = above_stdio(src[i])) < 0) fail(r, SpawnStep::setup, errno);
  }
  for (int i = 0; i < 3; ++i)
    if (::dup2(src[i], i) < 0) fail(r, SpawnStep::setup, errno);  // dup2 clears close-on-exec
  if (r.cwd != nullptr && ::chdir(r.cwd) != 0) fail(r, SpawnStep::workdir, errno);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  environ = const_cast<char**>(r.envp);  // execvp searches the child's own PATH
  ::execvp(r.file, r.argv);
  fail(r, SpawnStep::exec, errno);
}

// ---- in the parent ------------------------------------------------------------------------

// Every signal blocked while it forks: the child must not run the parent's handlers (libuv's
// would write into the parent's signal pipe) before it has put them back to their defaults.
template <class Child>
pid_t fork_blocked(Child&& in_child) {
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  pid_t pid = ::fork();
  if (pid == 0) in_child();
  int err = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = err;
  return pid;
}

}  // namespace

pid_t spawn_process(const SpawnRequest& r) {
  pid_t parent = ::getpid();
  return fork_blocked([&] { child(r, parent); });
}

pid_t spawn_detached(const SpawnRequest& r) {
  return fork_blocked([&] {
    pid_t self = ::getpid();
    pid_t pid = ::fork();
    if (pid == 0) child(r, self);
    if (pid < 0 && r.status_fd >= 0) {
      SpawnFailure f{0, errno, SpawnStep::setup};
      ssize_t n = ::write(r.status_fd, &f, sizeof f);
      (void)n;
    }
    ::_exit(pid < 0 ? 1 : 0);
  });
}

}  // namespace dtrain::agent
