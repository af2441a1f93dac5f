// The local workers (worker_group.hpp).
#include "worker_group.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/log.hpp"

namespace dtrain::agent {

namespace {

using Clock = std::chrono::steady_clock;

void alloc_cb(uv_handle_t* h, std::size_t, uv_buf_t* buf) noexcept {
  auto* w = static_cast<Worker*>(h->data);
  *buf = w == nullptr ? uv_buf_init(nullptr, 0) : uv_buf_init(w->group->read_buffer(), WorkerGroup::kReadBuffer);
}

void read_cb(uv_stream_t* s, ssize_t nread, const uv_buf_t*) noexcept {
  auto* w = static_cast<Worker*>(s->data);
  if (w == nullptr) return;
  w->group->on_read(*w, reinterpret_cast<uv_pipe_t*>(s) == w->err.get(), nread);
}

}  // namespace

WorkerGroup::~WorkerGroup() {
  if (status_rd_ >= 0) ::close(status_rd_);
  if (status_wr_ >= 0) ::close(status_wr_);
}

void WorkerGroup::open(uv_loop_t* loop, Launch launch) {
  loop_ = loop;
  launch_ = std::move(launch);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) throw_os_error(errno, "cannot create the workers' status pipe");
  status_rd_ = fds[0];
  status_wr_ = fds[1];
  int rc = drain_timer_.init([&](uv_timer_t* h) { return uv_timer_init(loop_, h); }, this);
  if (rc < 0) throw IoError(fmt::format("uv_timer_init: {}", uv_strerror(rc)));
}

namespace {

// Closes what it holds unless released.
struct Fds {
  int fd[2] = {-1, -1};
  ~Fds() {
    for (int f : fd)
      if (f >= 0) ::close(f);
  }
};

}  // namespace

void WorkerGroup::spawn(const config::RankInfo& r, const EnvMap& env,
                        const std::optional<std::filesystem::path>& log_dir, const std::vector<int>& cpus) {
  auto w = std::make_unique<Worker>();
  w->group = this;
  w->exit.rank = r.rank;
  w->exit.local_rank = r.local_rank;
  w->exit.node_rank = r.node_rank;

  std::vector<std::string> env_strings;
  env_strings.reserve(env.size());
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv(launch_.command);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);

  Fds out, err;  // [0] read here, [1] the worker's stdout / stderr
  if (::pipe2(out.fd, O_CLOEXEC) != 0 || ::pipe2(err.fd, O_CLOEXEC) != 0)
    throw_os_error(errno, fmt::format("cannot create the output pipes of rank {}", r.rank));
  open_pipes(*w, out.fd[0], err.fd[0]);
  out.fd[0] = err.fd[0] = -1;  // the pipe handles own them now

  SpawnRequest req;
  req.file = args[0];
  req.argv = args.data();
  req.envp = envp.data();
  req.cwd = launch_.cwd.c_str();
  req.stdio[1] = out.fd[1];
  req.stdio[2] = err.fd[1];
  req.status_fd = status_wr_;
  req.die_with_parent = true;
  // The agent's session, as a shell's job or torchrun's worker: with a session of its own each worker
  // was a scheduler autogroup of its own (kernel.sched_autogroup_enabled), which the scheduler shares
  // the CPU between as between users' logins (bench/launch/steps.sh measures the per-step cost).
  req.own_session = false;
  constexpr std::size_t kBits = 8 * sizeof(unsigned long);
  std::vector<unsigned long> mask;
  for (int c : cpus) {
    const auto cpu = static_cast<std::size_t>(c);
    if (mask.size() <= cpu / kBits) mask.resize(cpu / kBits + 1);
    mask[cpu / kBits] |= 1UL << (cpu % kBits);
  }
  if (!mask.empty()) {
    req.cpu_mask = mask.data();
    req.cpu_mask_bytes = mask.size() * sizeof(unsigned long);
  }
  w->started = Clock::now();
  pid_t pid = spawn_process(req);
  if (pid < 0) throw_os_error(errno, fmt::format("cannot start rank {}: fork", r.rank));
  w->spawned = true;
  w->exit.pid = pid;
  reaper_.watch(pid, [this, pid](int status) { on_exit(pid, status); });
  guardian_.watch(pid);
  router_.open(w->output, r, log_dir);

  uv_read_start(reinterpret_cast<uv_stream_t*>(w->out.get()), alloc_cb, read_cb);
  uv_read_start(reinterpret_cast<uv_stream_t*>(w->err.get()), alloc_cb, read_cb);
  w->out_open = w->err_open = true;
  workers_.push_back(std::move(w));
}

void WorkerGroup::open_pipes(Worker& w, int out_fd, int err_fd) {
  auto pipe_init = [&](uv_pipe_t* p) { return uv_pipe_init(loop_, p, 0); };
  int rc = w.out.init(pipe_init, &w);
  if (rc == 0) rc = uv_pipe_open(w.out.get(), out_fd);
  else ::close(out_fd);
  if (rc == 0) rc = w.err.init(pipe_init, &w);
  if (rc == 0) rc = uv_pipe_open(w.err.get(), err_fd);
  else ::close(err_fd);
  if (rc < 0) throw IoError(fmt::format("the output pipes of rank {}: {}", w.exit.rank, uv_strerror(rc)));
}

namespace {

// To the worker's process group; a worker that has not made its group yet (just forked: it calls
// setpgid or setsid before it unblocks signals and execs) gets it itself and dies of it before its exec.
void signal_worker(long pid, int sig) {
  if (::kill(-static_cast<pid_t>(pid), sig) != 0 && errno == ESRCH) ::kill(static_cast<pid_t>(pid), sig);
}

// It exited by itself and is not reaped yet (a zombie: its exit waits in the reaper's queue behind
// another's). A signal sent now does not end it, so it is not stopped by the agent.
bool exited_already(long pid) {
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid;
}

}  // namespace

void WorkerGroup::kill(int sig, bool stopping) {
  for (auto& w : workers_) {
    if (!w->live()) continue;
    if (stopping && !exited_already(w->exit.pid)) w->exit.stopped_by_agent = true;
    signal_worker(w->exit.pid, sig);
  }
}

int WorkerGroup::live() const {
  int n = 0;
  for (const auto& w : workers_) n += w->live() ? 1 : 0;
  return n;
}

std::set<pid_t> WorkerGroup::live_pids() const {
  std::set<pid_t> out;
  for (const auto* list : {&workers_, &retired_})
    for (const auto& w : *list)
      if (w->live()) out.insert(static_cast<pid_t>(w->exit.pid));
  return out;
}

bool WorkerGroup::finished() const {
  for (const auto& w : workers_)
    if (!w->finished()) return false;
  return true;
}

std::optional<WorkerExit> WorkerGroup::running(int rank) const {
  for (const auto& w : workers_) {
    if (!w->live() || w->exit.rank != rank) continue;
    WorkerExit e = w->exit;
    e.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - w->started).count();
    return e;
  }
  return std::nullopt;
}

std::vector<WorkerExit> WorkerGroup::exits() const {
  std::vector<WorkerExit> out;
  for (const auto& w : workers_) {
    out.push_back(w->exit);
    out.back().last_stderr = w->output.stderr_tail();
    out.back().first_exception = w->output.first_exception();
  }
  return out;
}

bool WorkerGroup::output_done(long pid) const {
  for (const auto& w : workers_)
    if (w->exit.pid == pid) return w->finished();
  return true;
}

void WorkerGroup::stderr_of(WorkerExit& exit) const {
  for (const auto& w : workers_) {
    if (w->exit.pid != exit.pid) continue;
    exit.last_stderr = w->output.stderr_tail();
    exit.first_exception = w->output.first_exception();
  }
}

void WorkerGroup::retire() {
  if (drain_timer_) uv_timer_stop(drain_timer_.get());
  for (auto& w : workers_) retired_.push_back(std::move(w));
  workers_.clear();
}

void WorkerGroup::kill_now() {
  for (auto& w : workers_) {
    if (w->live()) signal_worker(w->exit.pid, SIGKILL);
    w->out.close();
    w->err.close();
    w->out_open = w->err_open = false;
  }
}

void WorkerGroup::close() {
  drain_timer_.close();
  workers_.clear();
  retired_.clear();
}

void WorkerGroup::on_read(Worker& w, bool is_err, ssize_t nread) {
  guarded(listener_, [&] {
    if (nread == 0) return;
    if (nread < 0) {
      close_pipe(w, is_err);
      listener_.output_closed();
      return;
    }
    router_.feed(w.output, is_err, readbuf_, static_cast<std::size_t>(nread));
  });
}

void WorkerGroup::close_pipe(Worker& w, bool is_err) {
  router_.end(w.output, is_err);
  (is_err ? w.err : w.out).close();
  (is_err ? w.err_open : w.out_open) = false;
}

void WorkerGroup::drain_status_pipe() {
  SpawnFailure f;
  while (::read(status_rd_, &f, sizeof f) == static_cast<ssize_t>(sizeof f)) failures_[f.pid] = f;
}

Worker* WorkerGroup::find(pid_t pid) {
  for (const auto* list : {&workers_, &retired_})
    for (const auto& w : *list)
      if (w->exit.pid == pid) return w.get();
  return nullptr;
}

void WorkerGroup::on_exit(pid_t pid, int wait_status) {
  guarded(listener_, [&] {
    Worker* found = find(pid);
    if (found == nullptr) return;
    Worker& w = *found;
    w.exited = true;
    w.exit.exit_code = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 0;
    w.exit.signal = WIFSIGNALED(wait_status) ? WTERMSIG(wait_status) : 0;
    w.exit.duration_s = std::chrono::duration<double>(Clock::now() - w.started).count();
    // whatever is left of its process group goes with it
    ::kill(-static_cast<pid_t>(w.exit.pid), SIGKILL);
    guardian_.forget(w.exit.pid);
    drain_status_pipe();
    if (auto it = failures_.find(w.exit.pid); it != failures_.end()) {
      w.exit.exec_errno = it->second.err;  // a failed set-up before the exec counts as a failed exec
      w.exit.workdir_error = it->second.step == SpawnStep::workdir;
      w.exit.cpus_error = it->second.step == SpawnStep::cpus;
      failures_.erase(it);
    }
    DTRAIN_DEBUG(agent, "rank {} pid {} ended: {}", w.exit.rank, w.exit.pid, w.exit.describe());
    if (live() == 0) arm_drain();
    listener_.worker_exited(w.exit);
  });
}

// The last worker is gone but a pipe is still open (a process that left the group holds it):
// give it kDrainS to end, then stop reading.
void WorkerGroup::arm_drain() {
  bool pipes_open = false;
  for (auto& x : workers_) pipes_open |= x->out_open || x->err_open;
  if (!pipes_open || !drain_timer_ || uv_is_active(drain_timer_.handle())) return;
  uv_timer_start(drain_timer_.get(), [](uv_timer_t* t) noexcept {
    auto* self = static_cast<WorkerGroup*>(t->data);
    if (self == nullptr) return;
    guarded(self->listener_, [&] {
      for (auto& x : self->workers_) {
        if (x->out_open) self->close_pipe(*x, false);
        if (x->err_open) self->close_pipe(*x, true);
      }
      self->listener_.output_closed();
    });
  }, static_cast<std::uint64_t>(kDrainS * 1000), 0);
}

}  // namespace dtrain::agent
