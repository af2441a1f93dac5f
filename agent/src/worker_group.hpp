#pragma once
// The local workers of one generation: started side by side without waiting for their execs
// (spawn.hpp), each in a process group of its own in the agent's session, signalled as groups,
// reaped (reaper.hpp) with the exec error a child that could not exec reports on the status pipe,
// and read until both pipes close (or, when a process that escaped the group keeps them open, until
// a short drain period after the last exit).
#include <uv.h>

#include <chrono>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "dtrain/agent/env.hpp"
#include "dtrain/agent/worker_exit.hpp"
#include "dtrain/common/errors.hpp"
#include "dtrain/common/uv_handle.hpp"
#include "dtrain/config/plan.hpp"
#include "guardian.hpp"
#include "output_router.hpp"
#include "reaper.hpp"
#include "spawn.hpp"

namespace dtrain::agent {

class WorkerGroup;

struct Worker {
  WorkerGroup* group = nullptr;
  UvHandle<uv_pipe_t> out, err;
  bool spawned = false, exited = false, out_open = false, err_open = false;
  WorkerExit exit;
  WorkerOutput output;
  std::chrono::steady_clock::time_point started;

  bool finished() const { return exited && !out_open && !err_open; }
  bool live() const { return spawned && !exited; }
};

class WorkerGroup {
 public:
  static constexpr double kDrainS = 2.0;  // after the last exit, wait this long for pipes held by escapees
  static constexpr std::size_t kReadBuffer = 64 * 1024;

  // Called on the loop thread.
  struct Listener {
    virtual void worker_exited(const WorkerExit& exit) = 0;  // reaped, exec error known
    virtual void output_closed() = 0;                          // a pipe reached its end (or was abandoned)
    virtual void callback_failed(const std::exception& e) noexcept = 0;

   protected:
    ~Listener() = default;
  };
  // How every worker is started: COMMAND... in `cwd`.
  struct Launch {
    std::vector<std::string> command;
    std::string cwd;
  };

  WorkerGroup(OutputRouter& router, Guardian& guardian, Reaper& reaper, Listener& listener)
      : router_(router), guardian_(guardian), reaper_(reaper), listener_(listener) {}
  ~WorkerGroup();
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  // The status pipe and the drain timer. Throws IoError.
  void open(uv_loop_t* loop, Launch launch);
  // Starts one worker, bound to `cpus` unless empty; its logs go to `log_dir` when set. Throws
  // IoError (nothing is left running).
  void spawn(const config::RankInfo& r, const EnvMap& env, const std::optional<std::filesystem::path>& log_dir,
             const std::vector<int>& cpus);
  // `sig` to the process group of every live worker; `stopping`: the agent is stopping them.
  void kill(int sig, bool stopping = false);

  int live() const;
  // Process ids of the workers not reaped yet (this and retired generations).
  std::set<pid_t> live_pids() const;
  bool finished() const;  // every worker exited and its output is read (true when empty)
  // The live worker of `rank` in this generation, as an exit record so far (rank, pid, how long it
  // ran); nullopt when none.
  std::optional<WorkerExit> running(int rank) const;
  std::vector<WorkerExit> exits() const;  // with the last lines of their stderr
  // The worker `pid` of this generation exited and its output is read (or it is not here).
  bool output_done(long pid) const;
  void stderr_of(WorkerExit& exit) const;  // its last stderr lines and first exception so far
  // The generation is over: its workers leave the group (their handles close in the background).
  void retire();
  void clear_retired() { retired_.clear(); }

  // Teardown: SIGKILL every live group and stop reading (the loop then reaps them); close_timer()
  // when the job is over; close() once the loop has run.
  void kill_now();
  void close_timer() { drain_timer_.close(); }
  void close();

  // libuv callbacks
  void on_read(Worker& w, bool is_err, ssize_t nread);
  char* read_buffer() { return readbuf_; }

 private:
  void on_exit(pid_t pid, int wait_status);
  Worker* find(pid_t pid);
  void open_pipes(Worker& w, int out_fd, int err_fd);
  void close_pipe(Worker& w, bool is_err);
  void drain_status_pipe();
  void arm_drain();

  OutputRouter& router_;
  Guardian& guardian_;
  Reaper& reaper_;
  Listener& listener_;
  uv_loop_t* loop_ = nullptr;
  Launch launch_;
  int status_rd_ = -1, status_wr_ = -1;  // SpawnFailure records of children that could not exec
  std::map<long, SpawnFailure> failures_;
  UvHandle<uv_timer_t> drain_timer_;
  std::vector<std::unique_ptr<Worker>> workers_, retired_;
  char readbuf_[kReadBuffer];
};

// Runs a libuv callback's body: an exception is handed to the listener, never to libuv.
template <class F>
void guarded(WorkerGroup::Listener& l, F&& f) noexcept {
  try {
    f();
  } catch (const std::exception& e) {
    l.callback_failed(e);
  } catch (...) {
    l.callback_failed(InternalError("unknown exception in an agent callback"));
  }
}

}  // namespace dtrain::agent
