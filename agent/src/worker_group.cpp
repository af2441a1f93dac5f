// The local workers (worker_group.hpp).
#include "worker_group.hpp"

#include <fcntl.h>
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

void exit_cb(uv_process_t* p, std::int64_t status, int term_signal) noexcept {
  auto* w = static_cast<Worker*>(p->data);
  if (w == nullptr) return;
  w->group->on_exit(*w, status, term_signal);
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

void WorkerGroup::spawn(const config::RankInfo& r, const EnvMap& env,
                        const std::optional<std::filesystem::path>& log_dir) {
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
  std::vector<std::string> argv{launch_.helper, launch_.exec_word, launch_.agent_pid, "--"};
  argv.insert(argv.end(), launch_.command.begin(), launch_.command.end());
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);

  auto pipe_init = [&](uv_pipe_t* p) { return uv_pipe_init(loop_, p, 0); };
  int rc = w->out.init(pipe_init, w.get());
  if (rc == 0) rc = w->err.init(pipe_init, w.get());
  if (rc < 0) throw IoError(fmt::format("uv_pipe_init: {}", uv_strerror(rc)));

  uv_stdio_container_t stdio[4];
  stdio[0].flags = UV_IGNORE;  // stdin: /dev/null
  stdio[1].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_WRITABLE_PIPE);
  stdio[1].data.stream = reinterpret_cast<uv_stream_t*>(w->out.get());
  stdio[2].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_WRITABLE_PIPE);
  stdio[2].data.stream = reinterpret_cast<uv_stream_t*>(w->err.get());
  stdio[3].flags = UV_INHERIT_FD;  // the status pipe (fd 3 of the helper)
  stdio[3].data.fd = status_wr_;

  uv_process_options_t po{};
  po.file = launch_.helper.c_str();
  po.args = args.data();
  po.env = envp.data();
  po.cwd = launch_.cwd.c_str();
  po.stdio = stdio;
  po.stdio_count = 4;
  po.flags = UV_PROCESS_DETACHED;  // setsid(): own session and process group (pgid == pid)
  po.exit_cb = exit_cb;
  w->started = Clock::now();
  rc = w->proc.init([&](uv_process_t* p) { return uv_spawn(loop_, p, &po); }, w.get(), true);
  if (rc < 0) throw_os_error(rc, fmt::format("cannot start rank {} through '{}'", r.rank, launch_.helper));
  w->spawned = true;
  w->exit.pid = w->proc.get()->pid;
  guardian_.watch(w->exit.pid);
  router_.open(w->output, r, log_dir);

  uv_read_start(reinterpret_cast<uv_stream_t*>(w->out.get()), alloc_cb, read_cb);
  uv_read_start(reinterpret_cast<uv_stream_t*>(w->err.get()), alloc_cb, read_cb);
  w->out_open = w->err_open = true;
  workers_.push_back(std::move(w));
}

void WorkerGroup::kill(int sig, bool stopping) {
  for (auto& w : workers_) {
    if (!w->live()) continue;
    if (stopping) w->exit.stopped_by_agent = true;
    ::kill(-static_cast<pid_t>(w->exit.pid), sig);
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

std::vector<WorkerExit> WorkerGroup::exits() const {
  std::vector<WorkerExit> out;
  for (const auto& w : workers_) {
    out.push_back(w->exit);
    out.back().last_stderr = w->output.stderr_tail();
  }
  return out;
}

bool WorkerGroup::output_done(long pid) const {
  for (const auto& w : workers_)
    if (w->exit.pid == pid) return w->finished();
  return true;
}

std::vector<std::string> WorkerGroup::stderr_tail(long pid) const {
  for (const auto& w : workers_)
    if (w->exit.pid == pid) return w->output.stderr_tail();
  return {};
}

void WorkerGroup::retire() {
  if (drain_timer_) uv_timer_stop(drain_timer_.get());
  for (auto& w : workers_) retired_.push_back(std::move(w));
  workers_.clear();
}

void WorkerGroup::kill_now() {
  for (auto& w : workers_) {
    if (w->live()) ::kill(-static_cast<pid_t>(w->exit.pid), SIGKILL);
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
  std::int32_t rec[2];
  for (;;) {
    ssize_t n = ::read(status_rd_, rec, sizeof rec);
    if (n != static_cast<ssize_t>(sizeof rec)) break;
    exec_errors_[rec[0]] = rec[1];
  }
}

void WorkerGroup::on_exit(Worker& w, std::int64_t status, int term_signal) {
  guarded(listener_, [&] {
    w.exited = true;
    w.exit.exit_code = static_cast<int>(status);
    w.exit.signal = term_signal;
    w.exit.duration_s = std::chrono::duration<double>(Clock::now() - w.started).count();
    w.proc.close();
    // whatever is left of its process group goes with it
    ::kill(-static_cast<pid_t>(w.exit.pid), SIGKILL);
    guardian_.forget(w.exit.pid);
    drain_status_pipe();
    if (auto it = exec_errors_.find(w.exit.pid); it != exec_errors_.end()) {
      w.exit.exec_errno = it->second;
      exec_errors_.erase(it);
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
