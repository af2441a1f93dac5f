// Starting a process without waiting for its exec (spawn.hpp).
//
// spawn_process() clones the child with CLONE_VM | CLONE_VFORK, as posix_spawn does: the child runs
// on a stack of its own inside this process's memory until its exec, so nothing is copied (fork()
// of the agent copies its page tables and both sides then take copy-on-write faults, which made
// each worker's start cost about as much as its exec), and this thread resumes once the child has
// exec'd or given up, while the exec'd programs load side by side. Living in the parent's memory,
// the child may only make system calls (raw ones: libc's wrappers and the sanitizers' interceptors
// keep state of their own) and write to its own stack; everything it needs is prepared here first
// (in a Child, which only spawn_detached's intermediate writes to: its own pid).
// spawn_detached() does the same twice: its intermediate starts the child the same way and exits.
#include "spawn.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <type_traits>
#include <vector>

#include "dtrain/common/exit_codes.h"
#include "dtrain/common/system.hpp"

namespace dtrain::agent {

namespace {

// ---- in the child: raw system calls only -----------------------------------------------------
// Not instrumented by the sanitizers: the frames of a child that never returns would leave their
// shadow poisoned in the parent's memory.
#define DTRAIN_CHILD_CODE __attribute__((no_sanitize("address", "thread")))

// An argument of syscall(2), which reads every one as a long.
template <class T>
DTRAIN_CHILD_CODE long word(T v) {
  if constexpr (std::is_pointer_v<T>) return reinterpret_cast<long>(v);
  else if constexpr (std::is_null_pointer_v<T>) return 0;
  else return static_cast<long>(v);
}

// syscall(2) with -errno as the failure (the errno it sets is the suspended parent thread's).
template <class... A>
DTRAIN_CHILD_CODE long sys(long nr, A... a) {
  long r = ::syscall(nr, word(a)...);
  return r < 0 ? -errno : r;
}

constexpr long kKernelSigsetBytes = 8;  // the kernel's sigset_t (64 signals), not glibc's

using CloneFn = int (*)(int (*)(void*), void*, int, void*, ...);

// What the child gets, prepared in the parent.
struct Child {
  SpawnRequest r;
  pid_t parent;
  const char* path;       // the PATH in r.envp (nullptr: none)
  const char** sh_argv;   // room for argc + 2 pointers: the argv of a run through /bin/sh
  int argc;
  void* stacks;           // where the clones' stacks are (spawn_detached's child: the second)
  CloneFn clone;          // libc's
};

[[noreturn]] DTRAIN_CHILD_CODE void fail(int status_fd, SpawnStep step, long err) {
  if (status_fd >= 0) {
    SpawnFailure f{static_cast<std::int32_t>(sys(SYS_getpid)), static_cast<std::int32_t>(-err), step};
    sys(SYS_write, status_fd, &f, sizeof f);
  }
  sys(SYS_exit_group, err == -ENOENT || err == -ENOTDIR ? DTRAIN_EXIT_NOT_FOUND : DTRAIN_EXIT_NOT_EXECUTABLE);
  __builtin_unreachable();
}

// fd moved above 2 (close-on-exec), so that putting the others in place cannot overwrite it.
DTRAIN_CHILD_CODE long above_stdio(long fd) { return fd >= 0 && fd < 3 ? sys(SYS_fcntl, fd, F_DUPFD_CLOEXEC, 3) : fd; }

// execve, and as execvp: a file the kernel cannot run (no #!) runs through /bin/sh. -errno.
DTRAIN_CHILD_CODE long exec_one(const Child& c, const char* file) {
  long err = sys(SYS_execve, file, c.r.argv, c.r.envp);
  if (err != -ENOEXEC) return err;
  c.sh_argv[0] = "/bin/sh";
  c.sh_argv[1] = file;
  for (int i = 1; i <= c.argc; ++i) c.sh_argv[i + 1] = c.r.argv[i];  // through the closing null
  sys(SYS_execve, "/bin/sh", c.sh_argv, c.r.envp);
  return err;
}

// execvp's search of c.path (unset: /bin:/usr/bin, as glibc's): the first candidate that runs
// wins; EACCES when one was found but none could be run. -errno.
DTRAIN_CHILD_CODE long exec_search(const Child& c) {
  if (std::strchr(c.r.file, '/') != nullptr) return exec_one(c, c.r.file);
  const std::size_t flen = std::strlen(c.r.file);
  char buf[PATH_MAX];
  bool denied = false;
  long err = -ENOENT;
  for (const char* p = c.path ? c.path : "/bin:/usr/bin";; ++p) {
    const char* end = std::strchr(p, ':');
    const std::size_t dlen = end ? static_cast<std::size_t>(end - p) : std::strlen(p);
    if (dlen + 1 + flen < sizeof buf) {
      std::memcpy(buf, p, dlen);
      std::size_t n = dlen;
      if (n != 0) buf[n++] = '/';  // an empty entry: the working folder
      std::memcpy(buf + n, c.r.file, flen + 1);
      err = exec_one(c, buf);
      if (err == -EACCES) denied = true;
      else if (err != -ENOENT && err != -ENOTDIR && err != -ESTALE && err != -ENODEV && err != -ETIMEDOUT) return err;
    }
    if (!end) break;
    p = end;
  }
  return denied ? -EACCES : err;
}

// Entered with every signal blocked (the parent's handlers must not run here).
DTRAIN_CHILD_CODE int child_main(void* arg) {
  const Child& c = *static_cast<const Child*>(arg);
  int status_fd = c.r.status_fd;
  const unsigned long dfl[4] = {};  // the kernel's struct sigaction, all zero: SIG_DFL, no flags, no mask
  for (long s = 1; s < 32; ++s)     // the real-time signals belong to libc
    if (s != SIGKILL && s != SIGSTOP) sys(SYS_rt_sigaction, s, dfl, nullptr, kKernelSigsetBytes);
  if (long e = c.r.own_session ? sys(SYS_setsid) : sys(SYS_setpgid, 0, 0); e < 0) fail(status_fd, SpawnStep::setup, e);
  if (c.r.die_with_parent) {
    if (long e = sys(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL); e < 0) fail(status_fd, SpawnStep::setup, e);
    if (sys(SYS_getppid) != c.parent) sys(SYS_exit_group, DTRAIN_EXIT_SIGNAL_BASE + SIGKILL);  // it died first
  }
  if (c.r.cpu_mask != nullptr)
    if (long e = sys(SYS_sched_setaffinity, 0, c.r.cpu_mask_bytes, c.r.cpu_mask); e < 0) fail(status_fd, SpawnStep::cpus, e);
  if ((status_fd = static_cast<int>(above_stdio(status_fd))) < 0) status_fd = -1;
  long src[3];
  for (int i = 0; i < 3; ++i) {
    src[i] = c.r.stdio[i] >= 0 ? c.r.stdio[i]
                               : sys(SYS_openat, AT_FDCWD, "/dev/null", (i == 0 ? O_RDONLY : O_RDWR) | O_CLOEXEC);
    if (src[i] < 0 || (src[i] = above_stdio(src[i])) < 0) fail(status_fd, SpawnStep::setup, src[i]);
  }
  for (int i = 0; i < 3; ++i)  // dup3 clears close-on-exec (src[i] > 2: never i itself)
    if (long e = sys(SYS_dup3, src[i], i, 0); e < 0) fail(status_fd, SpawnStep::setup, e);
  if (c.r.cwd != nullptr)
    if (long e = sys(SYS_chdir, c.r.cwd); e < 0) fail(status_fd, SpawnStep::workdir, e);
  const unsigned long none = 0;
  sys(SYS_rt_sigprocmask, SIG_SETMASK, &none, nullptr, kKernelSigsetBytes);
  fail(status_fd, SpawnStep::exec, exec_search(c));
}

// ---- in the parent ------------------------------------------------------------------------

// The value of PATH in an environment (nullptr: none).
const char* path_of(char* const* envp) {
  for (; envp && *envp; ++envp)
    if (std::strncmp(*envp, "PATH=", 5) == 0) return *envp + 5;
  return nullptr;
}

// The child's stack: its frames and a PATH_MAX name.
constexpr std::size_t kStack = 64 << 10;

// libc's clone() itself, past any interposer: ThreadSanitizer's takes a CLONE_VFORK child for a
// fork and resets its own state in it, which a CLONE_VM child shares with this process.
CloneFn libc_clone() {
  static const CloneFn fn = [] {
    CloneFn found = &::clone;
    void* libc = ::dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    if (void* sym = libc ? ::dlsym(libc, "clone") : nullptr) std::memcpy(&found, &sym, sizeof found);
    return found;
  }();
  return fn;
}

// Runs fn(c) in a CLONE_VM | CLONE_VFORK child on a stack of `stack` (kStack bytes): returns its
// pid once it has exec'd or exited; -errno.
DTRAIN_CHILD_CODE long clone_vfork(int (*fn)(void*), void* stack, Child& c) {
  pid_t pid = c.clone(fn, static_cast<char*>(stack) + kStack, CLONE_VM | CLONE_VFORK | SIGCHLD, &c);
  return pid < 0 ? -errno : pid;
}

// The intermediate of spawn_detached: starts the child, so that it is re-parented once this exits.
DTRAIN_CHILD_CODE int intermediate_main(void* arg) {
  Child& c = *static_cast<Child*>(arg);
  c.parent = static_cast<pid_t>(sys(SYS_getpid));
  long pid = clone_vfork(child_main, static_cast<char*>(c.stacks) + kStack, c);
  if (pid < 0 && c.r.status_fd >= 0) {
    SpawnFailure f{0, static_cast<std::int32_t>(-pid), SpawnStep::setup};
    sys(SYS_write, c.r.status_fd, &f, sizeof f);
  }
  sys(SYS_exit_group, pid < 0 ? 1 : 0);
  __builtin_unreachable();
}

// Prepares the Child of r and runs fn in a CLONE_VM | CLONE_VFORK child with `stacks` stacks.
pid_t start(const SpawnRequest& r, int (*fn)(void*), int stacks) {
  int argc = 0;
  while (r.argv[argc] != nullptr) ++argc;
  std::vector<const char*> sh_argv(static_cast<std::size_t>(argc) + 2);
  const std::size_t bytes = kStack * static_cast<std::size_t>(stacks);
  void* mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (mem == MAP_FAILED) return -1;
  Child c{r, ::getpid(), path_of(r.envp), sh_argv.data(), argc, mem, libc_clone()};
  long pid;
  {
    // The child must not run the parent's handlers (libuv's would write into the parent's signal
    // pipe) before it has put them back to their defaults.
    sys::AllSignalsBlocked blocked;
    pid = clone_vfork(fn, mem, c);
  }
  ::munmap(mem, bytes);
  if (pid < 0) errno = static_cast<int>(-pid);
  return pid < 0 ? -1 : static_cast<pid_t>(pid);
}

}  // namespace

pid_t spawn_process(const SpawnRequest& r) { return start(r, child_main, 1); }

pid_t spawn_detached(const SpawnRequest& r) { return start(r, intermediate_main, 2); }

}  // namespace dtrain::agent
