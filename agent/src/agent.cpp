#include "dtrain/common/net.hpp"
#include "dtrain/agent/agent.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>

#include "dtrain/agent/env.hpp"
#include "dtrain/agent/output.hpp"
#include "dtrain/common/errors.hpp"
#include "dtrain/common/exit_codes.hpp"
#include "dtrain/common/log.hpp"
#include "dtrain/common/system.hpp"
#include "dtrain/rendezvous/node_session.hpp"
#include "dtrain/rendezvous/server.hpp"
#include "dtrain/common/uv_handle.hpp"

namespace dtrain::agent {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const char* state_name(JobState s) {
  switch (s) {
    case JobState::starting: return "starting";
    case JobState::running: return "running";
    case JobState::stopping: return "stopping";
    case JobState::restarting: return "restarting";
    case JobState::done: return "done";
  }
  return "?";
}

namespace {

constexpr std::size_t kLastLines = 10;
constexpr double kDrainS = 2.0;  // after the last exit, wait this long for pipes held by escapees

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", sig);
}

std::uint64_t to_ms(double s) { return s <= 0 ? 0 : static_cast<std::uint64_t>(s * 1000.0 + 0.5); }

// What execvp would do with command[0], checked before anything is spawned.
struct Resolved {
  int code = 0;  // 0, exit_code::not_found or exit_code::not_executable
  std::string message;
};

Resolved resolve_command(const std::string& cmd, const std::string& path_var, const fs::path& workdir) {
  auto check = [](const fs::path& p, Resolved& r) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) return false;
    if (S_ISDIR(st.st_mode)) {
      r = {exit_code::not_executable, fmt::format("'{}' is a directory, not a program", p.string())};
    } else if (::access(p.c_str(), X_OK) != 0) {
      r = {exit_code::not_executable,
           fmt::format("'{}' is not executable (chmod +x it, or run it through its interpreter)", p.string())};
    } else {
      r = {};
    }
    return true;
  };
  Resolved r{exit_code::not_found, ""};
  if (cmd.empty()) return {exit_code::usage, "the job's command is empty"};
  if (cmd.find('/') != std::string::npos) {
    fs::path p = fs::path(cmd).is_absolute() ? fs::path(cmd) : workdir / cmd;
    if (!check(p, r))
      r = {exit_code::not_found, fmt::format("command not found: '{}' (no such file)", p.string())};
    return r;
  }
  bool found_non_exec = false;
  Resolved non_exec;
  std::size_t start = 0;
  while (start <= path_var.size()) {
    auto colon = path_var.find(':', start);
    std::string dir = path_var.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    if (dir.empty()) dir = ".";
    fs::path p = fs::path(dir).is_absolute() ? fs::path(dir) / cmd : workdir / dir / cmd;
    Resolved one;
    if (check(p, one)) {
      if (one.code == 0) return one;
      if (!found_non_exec) non_exec = one;
      found_non_exec = true;
    }
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  if (found_non_exec) return non_exec;
  return {exit_code::not_found, fmt::format("command not found: '{}' (searched PATH={})", cmd, path_var)};
}

}  // namespace

int WorkerExit::status() const {
  if (signal != 0) return exit_code::signal_base + signal;
  return exit_code;
}

std::string WorkerExit::describe() const {
  if (exec_errno != 0)
    return fmt::format("could not execute the command ({}), exit code {}", std::strerror(exec_errno), exit_code);
  if (signal != 0) return fmt::format("killed by {} ({})", signal_name(signal), signal);
  return fmt::format("exit code {}", exit_code);
}

// ---------------------------------------------------------------------------------------------

struct Worker {
  Agent::Impl* agent = nullptr;
  config::RankInfo info{};
  UvHandle<uv_process_t> proc;
  UvHandle<uv_pipe_t> out, err;
  bool spawned = false, exited = false, out_open = false, err_open = false;
  WorkerExit exit;
  LineSplitter out_lines, err_lines;
  std::deque<std::string> last_err;
  int log_out = -1, log_err = -1;
  std::string tag_out, tag_err;
  bool to_terminal = true;
  Clock::time_point started;

  ~Worker() {
    if (log_out >= 0) ::close(log_out);
    if (log_err >= 0) ::close(log_err);
  }
  bool finished() const { return exited && !out_open && !err_open; }
  bool live() const { return spawned && !exited; }
};

enum class StopReason { none, failure, signal, timeout, peer_failed, peer_restart, abort };

struct Agent::Impl {
  AgentOptions opt;
  AgentHooks hooks;
  AgentResult result;
  std::unique_ptr<rdzv::Server> store;  // the embedded standalone store (embed_store)

  uv_loop_t loop{};
  bool loop_inited = false;
  std::atomic<JobState> state{JobState::starting};

  std::mutex events_mu;
  std::vector<Event> events;
  bool events_closed = false;
  UvHandle<uv_async_t> async;

  UvHandle<uv_signal_t> signals[5];
  UvHandle<uv_timer_t> grace_timer, backoff_timer, runtime_timer, drain_timer;
  UvHandle<uv_process_t> guardian;
  UvHandle<uv_pipe_t> guardian_in;
  int status_rd = -1, status_wr = -1;
  std::map<long, int> exec_errors;  // pid -> errno, from the shim

  std::vector<std::unique_ptr<Worker>> workers, graveyard;
  int generation = 0;
  int go_generation = -1;
  std::optional<int> next_generation;
  StopReason stop_reason = StopReason::none;
  int stop_signal = 0;
  int stop_code = 0;  // for abort / peer_failed
  std::string stop_text;
  bool escalated = false;
  std::optional<WorkerExit> root;
  Clock::time_point job_start;

  EnvMap base_env;
  EnvContext ctx;
  fs::path workdir;
  fs::path run_dir;
  bool remove_run_dir = false;
  std::string self_exe;
  std::string shim_exe;                  // what is exec'd for a worker and the guardian
  std::string exec_word = "__exec", guard_word = "__guard";
  std::vector<std::string> command;
  std::string agent_pid;
  int local_total = 0;

  // terminal output and the progress line
  std::string out_buf, err_buf;
  bool progress_on = false, progress_tty = false, progress_shown = false;
  std::string progress_text;
  char readbuf[64 * 1024];

  Impl(AgentOptions o, AgentHooks h) : opt(std::move(o)), hooks(std::move(h)) {}
  ~Impl();
  void close_loop();
  void close_control_handles();

  // -- setup
  int run();
  void prepare();
  void start_guardian();
  void start_store();
  void guardian_send(char op, long pgid);

  // -- state machine
  void set_state(JobState s);
  void start_generation();
  void spawn_all();
  void spawn_worker(const config::RankInfo& r);
  void begin_stop(int sig);
  void kill_live(int sig);
  void maybe_generation_done();
  void finish(int code);
  void fatal(const std::exception& e);

  // -- events
  void on_exit(Worker* w, std::int64_t status, int term_signal);
  void on_read(Worker* w, bool is_err, ssize_t nread);
  void close_pipe(Worker* w, bool is_err);
  void on_signal(int sig);
  void on_event(const Event& e);
  void drain_status_pipe();

  // -- output
  void say(const std::string& line);
  void flush_terminal();
  void set_progress(std::string text);
  void update_progress();
  void clear_progress();
  int live_count() const;
};

// ---- libuv callbacks (noexcept: catch, log, stop the job) -----------------------------------

namespace {

template <class F>
void guarded(Agent::Impl* a, F&& f) noexcept {
  try {
    f();
  } catch (const std::exception& e) {
    a->fatal(e);
  } catch (...) {
    a->fatal(InternalError("unknown exception in an agent callback"));
  }
}

void alloc_cb(uv_handle_t* h, std::size_t, uv_buf_t* buf) noexcept {
  auto* w = static_cast<Worker*>(h->data);
  if (w == nullptr) {
    *buf = uv_buf_init(nullptr, 0);
    return;
  }
  *buf = uv_buf_init(w->agent->readbuf, sizeof w->agent->readbuf);
}

void read_cb(uv_stream_t* s, ssize_t nread, const uv_buf_t*) noexcept {
  auto* w = static_cast<Worker*>(s->data);
  if (w == nullptr) return;
  bool is_err = reinterpret_cast<uv_pipe_t*>(s) == w->err.get();
  guarded(w->agent, [&] { w->agent->on_read(w, is_err, nread); });
}

void exit_cb(uv_process_t* p, std::int64_t status, int term_signal) noexcept {
  auto* w = static_cast<Worker*>(p->data);
  if (w == nullptr) return;
  guarded(w->agent, [&] { w->agent->on_exit(w, status, term_signal); });
}

}  // namespace

// ---- setup ----------------------------------------------------------------------------------

Agent::Impl::~Impl() {
  if (loop_inited) close_loop();
  if (store) store->stop();
  if (status_rd >= 0) ::close(status_rd);
  if (status_wr >= 0) ::close(status_wr);
  if (remove_run_dir && !run_dir.empty()) {
    std::error_code ec;
    fs::remove_all(run_dir, ec);
  }
}

// The event async, signal watchers, timers and the guardian's stdin pipe: everything but the
// workers' own handles.
void Agent::Impl::close_control_handles() {
  {
    std::lock_guard lk(events_mu);
    events_closed = true;
    async.close();
  }
  for (auto& s : signals) s.close();
  grace_timer.close();
  backoff_timer.close();
  runtime_timer.close();
  drain_timer.close();
  guardian_in.close();
}

void Agent::Impl::close_loop() {
  // Exception path: nothing may survive us.
  for (auto& w : workers)
    if (w->live()) ::kill(-static_cast<pid_t>(w->exit.pid), SIGKILL);
  close_control_handles();
  for (auto& w : workers) {
    w->out.close();
    w->err.close();
    w->out_open = w->err_open = false;
  }
  state = JobState::done;
  uv_run(&loop, UV_RUN_DEFAULT);  // reaps workers and the guardian, runs close callbacks
  workers.clear();
  graveyard.clear();
  guardian.close();
  uv_run(&loop, UV_RUN_DEFAULT);
  int rc = uv_loop_close(&loop);
  if (rc != 0) DTRAIN_WARN(agent, "libuv loop closed with handles left: {}", uv_strerror(rc));
}

void Agent::Impl::prepare() {
  const auto& spec = opt.plan.spec;
  command = spec.command;
  command.insert(command.end(), opt.extra_args.begin(), opt.extra_args.end());
  if (command.empty() || command[0].empty())
    throw ConfigError("the job has no command: set \"command\" in the job spec (e.g. [\"python3\", \"train.py\"])");
  std::error_code ec;
  workdir = fs::absolute(spec.workdir.empty() ? fs::path(".") : fs::path(spec.workdir), ec);
  if (!fs::is_directory(workdir, ec))
    throw ConfigError(fmt::format("workdir '{}' is not a directory: fix \"workdir\" in the job spec", spec.workdir));
  // validate the tag format once, before anything runs
  (void)format_tag(opt.output.tag_format, 0, 0, 0, "stdout");

  base_env = current_environment();
  self_exe = opt.self_exe;
  if (self_exe.empty()) {
    char buf[4096];
    ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) throw IoError(fmt::format("readlink /proc/self/exe: {}", errno_text(errno)));
    self_exe.assign(buf, static_cast<std::size_t>(n));
  }
  agent_pid = std::to_string(::getpid());
  shim_exe = self_exe;
  if (opt.shim.empty()) {
    fs::path dir = fs::path(self_exe).parent_path();
    for (const fs::path& c : {dir / "dtrain-shim", dir / ".." / "libexec" / "dtrain" / "dtrain-shim"}) {
      if (::access(c.c_str(), X_OK) == 0) {
        shim_exe = c.string();
        exec_word = "exec";
        guard_word = "guard";
        break;
      }
    }
  } else if (opt.shim != "self") {
    shim_exe = opt.shim;
    exec_word = "exec";
    guard_word = "guard";
  }

  const auto& plan = opt.plan;
  for (const auto& r : plan.ranks)
    if (r.node_rank == plan.identity.node_rank) ++local_total;

  ctx.max_restarts = opt.max_restarts;
  ctx.run_id = plan.run_id.empty() ? fmt::format("dtrain-{}", ::getpid()) : plan.run_id;
  result.restarts = 0;
  ctx.master_addr = plan.identity.master_addr.empty() ? "127.0.0.1" : plan.identity.master_addr;
  ctx.store_addr = opt.store_addr;
  ctx.store_token = opt.store_token;
  ctx.local_addr = opt.local_addr;
  ctx.cores = sys::usable_cpus();

  // run folder: <log_dir>/<run_id>/ (kept) or a private temporary one (removed at the end)
  if (!opt.log_dir.empty()) {
    run_dir = fs::absolute(fs::path(opt.log_dir) / ctx.run_id, ec);
    fs::create_directories(run_dir, ec);
    if (ec)
      throw ConfigError(fmt::format("cannot create the log folder '{}': {} (fix output.log_dir or --log-dir)",
                                    run_dir.string(), ec.message()));
  } else {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = fmt::format("{}/dtrain-{}-XXXXXX", tmp && *tmp ? tmp : "/tmp", ctx.run_id);
    std::vector<char> b(templ.begin(), templ.end());
    b.push_back('\0');
    if (::mkdtemp(b.data()) == nullptr)
      throw IoError(fmt::format("mkdtemp {}: {}", templ, errno_text(errno)));
    run_dir = b.data();
    remove_run_dir = true;
  }
  result.run_dir = run_dir.string();
  ctx.plan_path = (run_dir / "plan.json").string();
  {
    int fd = ::open(ctx.plan_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw IoError(fmt::format("cannot write {}: {}", ctx.plan_path, errno_text(errno)));
    bool ok = write_all(fd, opt.plan_json.empty() ? std::string_view("{}\n") : std::string_view(opt.plan_json));
    if (ok && (opt.plan_json.empty() || opt.plan_json.back() != '\n')) ok = write_all(fd, "\n");
    ::close(fd);
    if (!ok) throw IoError(fmt::format("cannot write {}: {}", ctx.plan_path, errno_text(errno)));
  }

  progress_tty = ::isatty(opt.output.stderr_fd) == 1;
  progress_on = opt.progress == 1 || (opt.progress == -1 && progress_tty);
}

void Agent::Impl::start_store() {
  unsigned char raw[16];
  std::size_t got = 0;
  while (got < sizeof raw) {
    ssize_t n = ::getrandom(raw + got, sizeof raw - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw IoError(fmt::format("getrandom: {}", errno_text(errno)));
    got += static_cast<std::size_t>(n);
  }
  std::string token;
  for (unsigned char c : raw) token += fmt::format("{:02x}", c);
  rdzv::ServerOptions so;
  so.host = "127.0.0.1";
  so.port = 0;
  so.token = token;
  so.run_id = ctx.run_id;
  store = std::make_unique<rdzv::Server>(so);
  store->start();
  ctx.store_addr = fmt::format("127.0.0.1:{}", store->port());
  ctx.store_token = token;
  ctx.local_addr = "127.0.0.1";
  DTRAIN_DEBUG(agent, "standalone store on {}", ctx.store_addr);
}

void Agent::Impl::start_guardian() {
  int rc = guardian_in.init([&](uv_pipe_t* p) { return uv_pipe_init(&loop, p, 0); }, nullptr);
  if (rc < 0) throw IoError(fmt::format("uv_pipe_init: {}", uv_strerror(rc)));
  char* args[] = {shim_exe.data(), guard_word.data(), nullptr};
  uv_stdio_container_t stdio[3];
  stdio[0].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_READABLE_PIPE);
  stdio[0].data.stream = reinterpret_cast<uv_stream_t*>(guardian_in.get());
  stdio[1].flags = UV_IGNORE;
  stdio[2].flags = UV_INHERIT_FD;
  stdio[2].data.fd = opt.output.stderr_fd;
  uv_process_options_t po{};
  po.file = shim_exe.c_str();
  po.args = args;
  po.stdio = stdio;
  po.stdio_count = 3;
  po.flags = UV_PROCESS_DETACHED;
  po.exit_cb = [](uv_process_t* p, std::int64_t, int) noexcept {
    auto* self = static_cast<Impl*>(p->data);
    if (self != nullptr) self->guardian.close();
  };
  rc = guardian.init([&](uv_process_t* p) { return uv_spawn(&loop, p, &po); }, this, true);
  if (rc < 0) {
    guardian_in.close();
    throw IoError(fmt::format("cannot start the guardian process '{} {}': {}", shim_exe, guard_word, uv_strerror(rc)));
  }
}

void Agent::Impl::guardian_send(char op, long pgid) {
  if (!guardian_in) return;
  std::string msg = fmt::format("{}{}\n", op, pgid);
  uv_buf_t b = uv_buf_init(msg.data(), static_cast<unsigned>(msg.size()));
  auto* s = reinterpret_cast<uv_stream_t*>(guardian_in.get());
  int n = uv_try_write(s, &b, 1);
  if (n == static_cast<int>(msg.size())) return;
  if (n < 0 && n != UV_EAGAIN) {
    DTRAIN_WARN(agent, "guardian pipe: {}", uv_strerror(n));
    return;
  }
  struct Req {
    uv_write_t req;
    std::string bytes;
  };
  auto* r = new Req{};
  r->bytes = msg.substr(n > 0 ? static_cast<std::size_t>(n) : 0);
  uv_buf_t rb = uv_buf_init(r->bytes.data(), static_cast<unsigned>(r->bytes.size()));
  int rc = uv_write(&r->req, s, &rb, 1, [](uv_write_t* req, int) noexcept { delete reinterpret_cast<Req*>(req); });
  if (rc < 0) delete r;
}

int Agent::Impl::run() {
  prepare();
  // a bad command is reported once, before anything is spawned
  {
    EnvMap env = base_env;
    for (const auto& [k, v] : opt.plan.spec.env) env[k] = v;
    auto it = env.find("PATH");
    Resolved r = resolve_command(command[0], it == env.end() ? "/usr/bin:/bin" : it->second, workdir);
    if (r.code != 0) {
      result.exit_code = r.code;
      result.reason = r.message;
      say(fmt::format("dtrain: {}", r.message));
      state = JobState::done;
      return r.code;
    }
  }

  if (opt.embed_store && opt.store_addr.empty()) start_store();

  int rc = uv_loop_init(&loop);
  if (rc < 0) throw IoError(fmt::format("uv_loop_init: {}", uv_strerror(rc)));
  loop_inited = true;

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) throw IoError(fmt::format("pipe2: {}", errno_text(errno)));
  status_rd = fds[0];
  status_wr = fds[1];

  start_guardian();

  const int sigs[5] = {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2};
  for (int i = 0; i < 5; ++i) {
    rc = signals[i].init([&](uv_signal_t* s) { return uv_signal_init(&loop, s); }, this);
    if (rc < 0) throw IoError(fmt::format("uv_signal_init: {}", uv_strerror(rc)));
    uv_signal_start(signals[i].get(), [](uv_signal_t* s, int sig) noexcept {
      auto* self = static_cast<Impl*>(s->data);
      if (self != nullptr) guarded(self, [&] { self->on_signal(sig); });
    }, sigs[i]);
  }
  std::signal(SIGPIPE, SIG_IGN);
  for (auto* t : {&grace_timer, &backoff_timer, &runtime_timer, &drain_timer}) {
    rc = t->init([&](uv_timer_t* h) { return uv_timer_init(&loop, h); }, this);
    if (rc < 0) throw IoError(fmt::format("uv_timer_init: {}", uv_strerror(rc)));
  }
  std::unique_lock async_lock(events_mu);  // post() reads `async` from other threads
  rc = async.init([&](uv_async_t* a) {
    return uv_async_init(&loop, a, [](uv_async_t* h) noexcept {
      auto* self = static_cast<Impl*>(h->data);
      if (self == nullptr) return;
      std::vector<Event> evs;
      {
        std::lock_guard lk(self->events_mu);
        evs.swap(self->events);
      }
      for (const auto& e : evs) guarded(self, [&] { self->on_event(e); });
    });
  }, this);
  if (rc < 0) throw IoError(fmt::format("uv_async_init: {}", uv_strerror(rc)));
  if (!events.empty()) uv_async_send(async.get());
  async_lock.unlock();

  job_start = Clock::now();
  if (opt.max_runtime_s && *opt.max_runtime_s > 0) {
    uv_timer_start(runtime_timer.get(), [](uv_timer_t* t) noexcept {
      auto* self = static_cast<Impl*>(t->data);
      if (self == nullptr || self->state == JobState::done) return;
      guarded(self, [&] {
        if (self->stop_reason == StopReason::signal || self->stop_reason == StopReason::abort) return;
        self->stop_reason = StopReason::timeout;
        self->stop_text = fmt::format("max_runtime_s {} passed", *self->opt.max_runtime_s);
        self->say(fmt::format("dtrain: {}: stopping the job", self->stop_text));
        self->begin_stop(SIGTERM);
      });
    }, to_ms(*opt.max_runtime_s), 0);
  }

  start_generation();
  uv_run(&loop, UV_RUN_DEFAULT);
  return result.exit_code;
}

// ---- state machine --------------------------------------------------------------------------

void Agent::Impl::set_state(JobState s) {
  state = s;
  if (hooks.on_state) hooks.on_state(s, generation);
  update_progress();
}

void Agent::Impl::start_generation() {
  graveyard.clear();
  set_state(JobState::starting);
  if (opt.external_start && go_generation < generation) return;  // wait for Event::go
  spawn_all();
}

void Agent::Impl::spawn_all() {
  graveyard.clear();
  stop_reason = StopReason::none;
  stop_signal = 0;
  escalated = false;
  root.reset();
  ctx.generation = generation;
  ctx.master_port = opt.master_port ? *opt.master_port : net::pick_free_port("0.0.0.0");
  if (!remove_run_dir) {
    std::error_code ec;
    fs::create_directories(run_dir / fmt::format("attempt-{}", generation), ec);
    fs::path attempt = run_dir / fmt::format("attempt-{}", generation);
    if (ec) throw IoError(fmt::format("cannot create {}: {}", attempt.string(), ec.message()));
    result.logs = attempt.string();
  }
  for (const auto& r : opt.plan.ranks) {
    if (r.node_rank != opt.plan.identity.node_rank) continue;
    try {
      spawn_worker(r);
    } catch (const std::exception& e) {
      say(fmt::format("dtrain: {}", e.what()));
      stop_reason = StopReason::abort;
      stop_code = exit_code::internal;
      stop_text = e.what();
      set_state(JobState::running);
      begin_stop(SIGKILL);
      return;
    }
  }
  set_state(JobState::running);
  maybe_generation_done();  // a job of zero local workers is done at once
}

void Agent::Impl::spawn_worker(const config::RankInfo& r) {
  auto w = std::make_unique<Worker>();
  Worker* wp = w.get();
  w->agent = this;
  w->info = r;
  w->exit.rank = r.rank;
  w->exit.local_rank = r.local_rank;
  w->exit.node_rank = r.node_rank;

  EnvMap env = worker_env(opt.plan, r, ctx, base_env);
  std::vector<std::string> env_strings;
  env_strings.reserve(env.size());
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);

  std::string dashes = "--";
  std::vector<char*> args{shim_exe.data(), exec_word.data(), agent_pid.data(), dashes.data()};
  for (auto& c : command) args.push_back(c.data());
  args.push_back(nullptr);

  auto pipe_init = [&](uv_pipe_t* p) { return uv_pipe_init(&loop, p, 0); };
  int rc = w->out.init(pipe_init, wp);
  if (rc == 0) rc = w->err.init(pipe_init, wp);
  if (rc < 0) throw IoError(fmt::format("uv_pipe_init: {}", uv_strerror(rc)));

  uv_stdio_container_t stdio[4];
  stdio[0].flags = UV_IGNORE;  // stdin: /dev/null
  stdio[1].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_WRITABLE_PIPE);
  stdio[1].data.stream = reinterpret_cast<uv_stream_t*>(w->out.get());
  stdio[2].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_WRITABLE_PIPE);
  stdio[2].data.stream = reinterpret_cast<uv_stream_t*>(w->err.get());
  stdio[3].flags = UV_INHERIT_FD;
  stdio[3].data.fd = status_wr;

  std::string cwd = workdir.string();
  uv_process_options_t po{};
  po.file = shim_exe.c_str();
  po.args = args.data();
  po.env = envp.data();
  po.cwd = cwd.c_str();
  po.stdio = stdio;
  po.stdio_count = 4;
  po.flags = UV_PROCESS_DETACHED;  // setsid(): own session and process group (pgid == pid)
  po.exit_cb = exit_cb;
  w->started = Clock::now();
  rc = w->proc.init([&](uv_process_t* p) { return uv_spawn(&loop, p, &po); }, wp, true);
  if (rc < 0)
    throw IoError(fmt::format("cannot start rank {} through '{}': {}", r.rank, shim_exe, uv_strerror(rc)));
  w->spawned = true;
  w->exit.pid = w->proc.get()->pid;
  guardian_send('+', w->exit.pid);

  if (!remove_run_dir) {
    fs::path dir = run_dir / fmt::format("attempt-{}", generation);
    auto open_log = [&](const char* ext) {
      fs::path p = dir / fmt::format("rank-{}.{}", r.rank, ext);
      int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_APPEND, 0644);
      if (fd < 0) DTRAIN_WARN(agent, "cannot open log {}: {}", p.string(), errno_text(errno));
      return fd;
    };
    w->log_out = open_log("out");
    w->log_err = open_log("err");
  }
  const auto& o = opt.output;
  if (o.tag) {
    w->tag_out = format_tag(o.tag_format, r.node_rank, r.rank, r.local_rank, "stdout");
    w->tag_err = format_tag(o.tag_format, r.node_rank, r.rank, r.local_rank, "stderr");
  }
  w->to_terminal = !o.terminal_ranks || o.terminal_ranks->count(r.rank) > 0;

  uv_read_start(reinterpret_cast<uv_stream_t*>(w->out.get()), alloc_cb, read_cb);
  uv_read_start(reinterpret_cast<uv_stream_t*>(w->err.get()), alloc_cb, read_cb);
  w->out_open = w->err_open = true;
  workers.push_back(std::move(w));
}

void Agent::Impl::kill_live(int sig) {
  for (auto& w : workers)
    if (w->live()) ::kill(-static_cast<pid_t>(w->exit.pid), sig);
}

void Agent::Impl::begin_stop(int sig) {
  if (state == JobState::done) return;
  for (auto& w : workers)
    if (w->live()) w->exit.stopped_by_agent = true;
  if (state == JobState::restarting) uv_timer_stop(backoff_timer.get());
  set_state(JobState::stopping);
  kill_live(sig);
  if (sig != SIGKILL && live_count() > 0) {
    uv_timer_start(grace_timer.get(), [](uv_timer_t* t) noexcept {
      auto* self = static_cast<Impl*>(t->data);
      if (self == nullptr) return;
      guarded(self, [&] {
        if (self->live_count() > 0)
          self->say(fmt::format("dtrain: {} worker(s) still running after the {} s grace period: SIGKILL",
                                self->live_count(), self->opt.grace_s));
        self->kill_live(SIGKILL);
      });
    }, to_ms(opt.grace_s), 0);
  }
  maybe_generation_done();
}

int Agent::Impl::live_count() const {
  int n = 0;
  for (const auto& w : workers) n += w->live() ? 1 : 0;
  return n;
}

void Agent::Impl::drain_status_pipe() {
  std::int32_t rec[2];
  for (;;) {
    ssize_t n = ::read(status_rd, rec, sizeof rec);
    if (n != static_cast<ssize_t>(sizeof rec)) break;
    exec_errors[rec[0]] = rec[1];
  }
}

void Agent::Impl::on_exit(Worker* w, std::int64_t status, int term_signal) {
  w->exited = true;
  w->exit.exit_code = static_cast<int>(status);
  w->exit.signal = term_signal;
  w->exit.duration_s = std::chrono::duration<double>(Clock::now() - w->started).count();
  w->proc.close();
  // whatever is left of its process group goes with it
  ::kill(-static_cast<pid_t>(w->exit.pid), SIGKILL);
  guardian_send('-', w->exit.pid);
  drain_status_pipe();
  if (auto it = exec_errors.find(w->exit.pid); it != exec_errors.end()) {
    w->exit.exec_errno = it->second;
    exec_errors.erase(it);
  }
  bool failed = term_signal != 0 || status != 0 || w->exit.exec_errno != 0;
  DTRAIN_DEBUG(agent, "rank {} pid {} ended: {}", w->exit.rank, w->exit.pid, w->exit.describe());
  if (failed && stop_reason == StopReason::none &&
      (state == JobState::running || state == JobState::starting)) {
    root = w->exit;
    stop_reason = StopReason::failure;
    if (w->exit.exec_errno != 0)
      say(fmt::format("dtrain: rank {}: cannot execute '{}': {}", w->exit.rank, command[0],
                      std::strerror(w->exit.exec_errno)));
    if (hooks.on_local_failure) hooks.on_local_failure(w->exit, generation);
    begin_stop(SIGTERM);
    return;
  }
  update_progress();
  if (live_count() == 0) {
    bool pipes_open = false;
    for (auto& x : workers) pipes_open |= x->out_open || x->err_open;
    if (pipes_open && !uv_is_active(drain_timer.handle())) {
      uv_timer_start(drain_timer.get(), [](uv_timer_t* t) noexcept {
        auto* self = static_cast<Impl*>(t->data);
        if (self == nullptr) return;
        guarded(self, [&] {
          for (auto& x : self->workers) {
            if (x->out_open) self->close_pipe(x.get(), false);
            if (x->err_open) self->close_pipe(x.get(), true);
          }
          self->flush_terminal();
          self->maybe_generation_done();
        });
      }, to_ms(kDrainS), 0);
    }
  }
  maybe_generation_done();
}

void Agent::Impl::on_read(Worker* w, bool is_err, ssize_t nread) {
  if (nread == 0) return;
  if (nread < 0) {
    close_pipe(w, is_err);
    flush_terminal();
    maybe_generation_done();
    return;
  }
  const char* data = readbuf;
  auto n = static_cast<std::size_t>(nread);
  int log_fd = is_err ? w->log_err : w->log_out;
  if (log_fd >= 0 && !write_all(log_fd, std::string_view(data, n))) {
    DTRAIN_WARN(agent, "log file of rank {}: {}", w->exit.rank, errno_text(errno));
    ::close(log_fd);
    (is_err ? w->log_err : w->log_out) = -1;
  }
  std::string ts = opt.output.timestamps ? timestamp_prefix(std::chrono::system_clock::now()) : std::string();
  std::string& sink = is_err ? err_buf : out_buf;
  const std::string& tag = is_err ? w->tag_err : w->tag_out;
  auto on_line = [&](std::string_view line) {
    if (is_err) {
      w->last_err.emplace_back(line);
      if (w->last_err.size() > kLastLines) w->last_err.pop_front();
    }
    if (!w->to_terminal) return;
    sink += ts;
    sink += tag;
    sink += line;
    sink += '\n';
  };
  (is_err ? w->err_lines : w->out_lines).feed(data, n, on_line);
  flush_terminal();
}

void Agent::Impl::close_pipe(Worker* w, bool is_err) {
  auto on_line = [&](std::string_view line) {
    if (is_err) {
      w->last_err.emplace_back(line);
      if (w->last_err.size() > kLastLines) w->last_err.pop_front();
    }
    if (!w->to_terminal) return;
    std::string& sink = is_err ? err_buf : out_buf;
    if (opt.output.timestamps) sink += timestamp_prefix(std::chrono::system_clock::now());
    sink += is_err ? w->tag_err : w->tag_out;
    sink += line;
    sink += '\n';
  };
  if (is_err) {
    w->err_lines.flush(on_line);
    w->err.close();
    w->err_open = false;
  } else {
    w->out_lines.flush(on_line);
    w->out.close();
    w->out_open = false;
  }
}

void Agent::Impl::maybe_generation_done() {
  if (state != JobState::running && state != JobState::stopping) return;
  for (const auto& w : workers)
    if (!w->finished()) return;
  uv_timer_stop(grace_timer.get());
  uv_timer_stop(drain_timer.get());
  flush_terminal();

  // the last lines of stderr belong to the exits we report
  std::vector<WorkerExit> others;
  for (auto& w : workers) {
    w->exit.last_stderr.assign(w->last_err.begin(), w->last_err.end());
    if (root && w->exit.pid == root->pid) {
      root->last_stderr = w->exit.last_stderr;
      continue;
    }
    if (w->exit.signal != 0 || w->exit.exit_code != 0 || w->exit.exec_errno != 0) others.push_back(w->exit);
  }
  for (auto& w : workers) graveyard.push_back(std::move(w));
  workers.clear();
  result.root_cause = root;
  result.other_failures = others;

  switch (stop_reason) {
    case StopReason::none:
      finish(exit_code::ok);
      return;
    case StopReason::signal:
      result.reason = fmt::format("interrupted by {}", signal_name(stop_signal));
      finish(exit_code::signal_base + stop_signal);
      return;
    case StopReason::timeout:
      result.reason = stop_text;
      finish(exit_code::max_runtime);
      return;
    case StopReason::abort:
      result.reason = stop_text;
      finish(stop_code);
      return;
    case StopReason::failure:
    case StopReason::peer_failed:
    case StopReason::peer_restart:
      break;
  }
  bool restartable = stop_reason == StopReason::peer_restart ||
                     (result.restarts < opt.max_restarts && !(root && root->exec_errno != 0));
  if (!restartable) {
    if (stop_reason == StopReason::peer_failed) {
      result.reason = stop_text;
      finish(stop_code != 0 ? stop_code : 1);
    } else {
      finish(root ? root->status() : 1);
    }
    return;
  }
  ++result.restarts;
  std::string why = root ? fmt::format("rank {} {}", root->rank, root->describe()) : stop_text;
  say(fmt::format("dtrain: {}; restarting the group ({}/{})", why, result.restarts,
                  std::max(opt.max_restarts, result.restarts)));
  set_state(JobState::restarting);
  uv_timer_start(backoff_timer.get(), [](uv_timer_t* t) noexcept {
    auto* self = static_cast<Impl*>(t->data);
    if (self == nullptr) return;
    guarded(self, [&] {
      self->generation = self->next_generation ? *self->next_generation : self->generation + 1;
      self->next_generation.reset();
      self->start_generation();
    });
  }, to_ms(opt.backoff_s), 0);
}

void Agent::Impl::finish(int code) {
  if (state == JobState::done) return;
  result.exit_code = code;
  set_state(JobState::done);
  clear_progress();
  close_control_handles();  // the guardian's stdin reaches EOF: it exits (its list is empty by now)
  if (store) store->stop();  // every worker is gone; overlaps with the guardian's exit
  if (code != 0) {
    std::string text = summary_text(result);
    if (!text.empty()) write_all(opt.output.stderr_fd, text);
  }
  if (!opt.summary_json.empty()) {
    std::string js = summary_json(result);
    int fd = ::open(opt.summary_json.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || !write_all(fd, js))
      say(fmt::format("dtrain: cannot write the summary to {}: {}", opt.summary_json, errno_text(errno)));
    if (fd >= 0) ::close(fd);
  }
}

void Agent::Impl::fatal(const std::exception& e) {
  DTRAIN_ERROR(agent, "{}", e.what());
  if (state == JobState::done) return;
  if (stop_reason != StopReason::abort) {
    stop_reason = StopReason::abort;
    stop_code = exit_code::internal;
    stop_text = e.what();
  }
  try {
    begin_stop(SIGKILL);
  } catch (...) {
    kill_live(SIGKILL);
  }
}

void Agent::Impl::on_signal(int sig) {
  if (state == JobState::done) return;
  if (sig == SIGUSR1 || sig == SIGUSR2) {
    kill_live(sig);
    return;
  }
  if (state == JobState::stopping) {
    if (!escalated && live_count() > 0) {
      escalated = true;
      say(fmt::format("dtrain: {} again: killing the workers now", signal_name(sig)));
      kill_live(SIGKILL);
    }
    if (stop_reason == StopReason::none || stop_reason == StopReason::failure) {
      // keep the root cause; an interrupt during a failure stop only escalates
    }
    return;
  }
  stop_reason = StopReason::signal;
  stop_signal = sig;
  say(fmt::format("dtrain: {}: stopping {} worker(s) (grace {} s; again to kill them now)", signal_name(sig),
                  live_count(), opt.grace_s));
  if (state == JobState::restarting || workers.empty()) {
    set_state(JobState::stopping);
    maybe_generation_done();
    return;
  }
  begin_stop(sig);
}

void Agent::Impl::on_event(const Event& e) {
  if (state == JobState::done) return;
  switch (e.kind) {
    case Event::Kind::go:
      go_generation = std::max(go_generation, e.generation);
      if (e.master_port > 0) opt.master_port = e.master_port;
      if (state == JobState::starting && workers.empty() && generation <= go_generation) spawn_all();
      return;
    case Event::Kind::peer_failed:
      if (stop_reason != StopReason::none) return;
      stop_reason = StopReason::peer_failed;
      stop_code = e.exit_code;
      stop_text = e.reason.empty() ? fmt::format("a worker on node {} failed", e.node_rank) : e.reason;
      break;
    case Event::Kind::node_lost:
      stop_reason = StopReason::abort;
      stop_code = exit_code::node_lost;
      stop_text = e.reason.empty() ? fmt::format("node {} was lost", e.node_rank) : e.reason;
      break;
    case Event::Kind::restart:
      if (stop_reason == StopReason::signal || stop_reason == StopReason::abort ||
          stop_reason == StopReason::timeout)
        return;
      stop_reason = StopReason::peer_restart;
      next_generation = e.generation;
      stop_text = e.reason.empty() ? fmt::format("the job moves to generation {}", e.generation) : e.reason;
      break;
    case Event::Kind::abort:
      stop_reason = StopReason::abort;
      stop_code = e.exit_code;
      stop_text = e.reason;
      break;
  }
  say(fmt::format("dtrain: {}: stopping the local workers", stop_text));
  if (state == JobState::restarting || (state == JobState::starting && workers.empty())) {
    set_state(JobState::stopping);
    maybe_generation_done();
    return;
  }
  if (state == JobState::stopping) return;
  begin_stop(SIGTERM);
}

// ---- output ---------------------------------------------------------------------------------

void Agent::Impl::say(const std::string& line) {
  flush_terminal();
  bool shown = progress_shown;
  if (shown) {
    write_all(opt.output.stderr_fd, "\r\x1b[K");
    progress_shown = false;
  }
  write_all(opt.output.stderr_fd, line + "\n");
  if (shown) update_progress();
}

void Agent::Impl::flush_terminal() {
  if (out_buf.empty() && err_buf.empty()) return;
  bool shown = progress_shown;
  if (shown) {
    write_all(opt.output.stderr_fd, "\r\x1b[K");
    progress_shown = false;
  }
  if (!out_buf.empty()) {
    write_all(opt.output.stdout_fd, out_buf);
    out_buf.clear();
  }
  if (!err_buf.empty()) {
    write_all(opt.output.stderr_fd, err_buf);
    err_buf.clear();
  }
  if (shown) set_progress(progress_text);
}

void Agent::Impl::set_progress(std::string text) {
  if (!progress_on) return;
  if (!progress_tty) {
    if (text != progress_text && !text.empty()) write_all(opt.output.stderr_fd, "dtrain: " + text + "\n");
    progress_text = std::move(text);
    return;
  }
  progress_text = std::move(text);
  if (progress_text.empty()) {
    clear_progress();
    return;
  }
  write_all(opt.output.stderr_fd, "\r\x1b[Kdtrain: " + progress_text);
  progress_shown = true;
}

void Agent::Impl::clear_progress() {
  if (progress_shown) write_all(opt.output.stderr_fd, "\r\x1b[K");
  progress_shown = false;
}

void Agent::Impl::update_progress() {
  if (!progress_on) return;
  std::string restart =
      result.restarts > 0 ? fmt::format(" (restart {}/{})", result.restarts, std::max(opt.max_restarts, result.restarts)) : "";
  switch (state.load()) {
    case JobState::starting:
      set_progress(opt.external_start && workers.empty() && go_generation < generation
                       ? fmt::format("waiting for the other nodes{}", restart)
                       : fmt::format("starting {} worker(s){}", local_total, restart));
      break;
    case JobState::running:
      set_progress(fmt::format("{}/{} workers running{}", live_count(), local_total, restart));
      break;
    case JobState::stopping:
      set_progress(fmt::format("stopping ({} worker(s) left)", live_count()));
      break;
    case JobState::restarting:
      set_progress(fmt::format("restarting {}/{}", result.restarts, std::max(opt.max_restarts, result.restarts)));
      break;
    case JobState::done:
      clear_progress();
      break;
  }
}

// ---- Agent ----------------------------------------------------------------------------------

Agent::Agent(AgentOptions options, AgentHooks hooks)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(hooks))) {}
Agent::~Agent() = default;

int Agent::run() { return impl_->run(); }
const AgentResult& Agent::result() const { return impl_->result; }
JobState Agent::state() const { return impl_->state.load(); }

void Agent::post(Event e) {
  std::lock_guard lk(impl_->events_mu);
  if (impl_->events_closed) return;
  impl_->events.push_back(std::move(e));
  if (impl_->async) uv_async_send(impl_->async.get());
}

}  // namespace dtrain::agent
