#pragma once
// Starting a process without waiting for its exec. libuv's uv_spawn blocks until the child has
// exec'd (a close-on-exec pipe), so workers started one after another waited for each other's exec
// in series; here the parent resumes as soon as the child has started its exec (CLONE_VFORK: the
// kernel has taken the new program, which then loads on its own), and the children's programs load
// side by side. The child, in raw system calls: its own process group (and session), stdio, signals
// back to their defaults and unblocked, the working folder, its CPUs when asked, optionally PR_SET_PDEATHSIG(SIGKILL)
// (and, when the parent is already gone, no exec at all), then the exec, found as execvp finds it
// along the PATH of its own environment. A child that fails writes one SpawnFailure record to
// `status_fd` (a pipe, close-on-exec, so a successful exec writes nothing) and exits 127 (not found)
// or 126; the parent reads it when it reaps the child.
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace dtrain::agent {

// Where a child failed: the exec itself, entering its working folder, binding it to its CPUs, or the
// rest of the set-up before them.
enum class SpawnStep : std::int32_t { exec = 0, workdir = 1, setup = 2, cpus = 3 };

struct SpawnFailure {
  std::int32_t pid = 0;
  std::int32_t err = 0;  // errno
  SpawnStep step = SpawnStep::exec;
};

struct SpawnRequest {
  const char* file = nullptr;    // execvp'd: searched along the PATH of `envp`
  char* const* argv = nullptr;
  char* const* envp = nullptr;   // the child's whole environment
  const char* cwd = nullptr;     // nullptr: the parent's
  int stdio[3] = {-1, -1, -1};   // what becomes fd 0, 1, 2; -1: /dev/null
  int status_fd = -1;            // where a SpawnFailure goes (-1: nowhere)
  bool die_with_parent = false;  // PR_SET_PDEATHSIG(SIGKILL), checked against the parent's pid
  // true: a session of its own (setsid), away from the parent's terminal and its signals; false: a
  // process group of its own in the parent's session (setpgid), hence in the parent's scheduler
  // autogroup, as a shell's job or torchrun's worker is. Either way the group is the child's pid.
  bool own_session = true;
  // Its CPU affinity (sched_setaffinity before the exec; its threads inherit it): a mask of
  // `cpu_mask_bytes` bytes as the kernel reads it (bit N of the array: CPU N); nullptr: the parent's.
  const unsigned long* cpu_mask = nullptr;
  std::size_t cpu_mask_bytes = 0;
};

// Starts the child and returns its pid; -1 with errno set when it cannot be made.
pid_t spawn_process(const SpawnRequest& r);

// The same through a short-lived intermediate process that starts the child and exits, so that the
// child is not ours (it is re-parented to init or to the nearest subreaper above us). Returns the
// intermediate's pid: reap it (waitpid) before this process becomes a subreaper, or the child is
// re-parented to us after all. If it cannot start the child the intermediate writes a SpawnFailure
// with pid 0. -1 with errno set when the intermediate cannot be made.
pid_t spawn_detached(const SpawnRequest& r);

}  // namespace dtrain::agent
