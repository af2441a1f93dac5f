// The head of a launch over several hosts (head.hpp): one libuv loop over the hosts' launch agents,
// their output and this process's signals, feeding HeadMachine and carrying out what it decides.
#include "dtrain/remote/head.hpp"

#include <uv.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "dtrain/agent/write_all.hpp"
#include "dtrain/common/exit_codes.hpp"
#include "dtrain/common/text.hpp"
#include "dtrain/common/uv_handle.hpp"
#include "dtrain/remote/head_link.hpp"
#include "head_machine.hpp"

namespace dtrain::remote {
namespace {

constexpr std::size_t kMaxPendingLine = 64 * 1024;
constexpr std::uint64_t kDrainMs = 5000;  // after the end, how long output may still arrive

void say(const std::string& s) { agent::write_all(STDERR_FILENO, "dtrain: " + s + "\n"); }

// One of a host's output streams, forwarded to this process's `fd` a whole line at a time, so that
// the hosts' lines never mix. On stderr, the host's kJoinedLine is taken out and noted in `joined`.
struct Output {
  UvHandle<uv_pipe_t> pipe;
  std::string pending;
  char buf[16384];
  int fd = STDOUT_FILENO;
  bool* joined = nullptr;  // stderr: where the joined line is noted

  void forward(std::string_view data) {
    pending.append(data);
    std::size_t cut = pending.rfind('\n');
    if (cut == std::string::npos && pending.size() < kMaxPendingLine) return;
    cut = cut == std::string::npos ? pending.size() : cut + 1;
    std::string_view whole = std::string_view(pending).substr(0, cut);
    if (std::size_t at = joined ? whole.find(kJoinedLine) : std::string_view::npos;
        at != std::string_view::npos && (at == 0 || whole[at - 1] == '\n')) {
      *joined = true;
      agent::write_all(fd, whole.substr(0, at));
      agent::write_all(fd, whole.substr(at + kJoinedLine.size()));
    } else {
      agent::write_all(fd, whole);
    }
    pending.erase(0, cut);
  }
  void finish() {
    if (!pending.empty()) agent::write_all(fd, pending + "\n");
    pending.clear();
    pipe.close();
  }
};

class Head;

struct Host {
  Head* head = nullptr;
  int rank = 0;
  std::string name;
  bool direct = false;  // this machine: started without the launch agent
  UvHandle<uv_process_t> proc;
  UvHandle<uv_pipe_t> in;
  Output out, err;
  bool running = false;
  bool killed = false;
  bool joined = false;  // its node joined the rendezvous (kJoinedLine came)
};

struct WriteReq {
  uv_write_t req;
  std::string data;
};

class Head {
 public:
  explicit Head(const HeadJob& job) : job_(job), machine_(static_cast<int>(job.hosts.size())) {
    uv_loop_init(&loop_);
  }
  ~Head() { uv_loop_close(&loop_); }
  Head(const Head&) = delete;
  Head& operator=(const Head&) = delete;

  int run();
  void exited(Host& h, std::int64_t status, int sig);
  void ended(const Host& h, int status, bool lost);
  void apply(const std::vector<HeadAction>& actions);

 private:
  int start(Host& h);
  void send(Host& h, std::string data);
  void end_all();
  std::string still_running() const;

  const HeadJob& job_;
  uv_loop_t loop_{};
  HeadMachine machine_;
  std::vector<std::unique_ptr<Host>> hosts_;
  UvHandle<uv_timer_t> timer_;
  std::vector<UvHandle<uv_signal_t>> signals_;
  std::optional<int> status_;
  bool told_ = false;  // the hosts were told a signal
};

void on_alloc(uv_handle_t* handle, std::size_t, uv_buf_t* buf) {
  auto* o = static_cast<Output*>(handle->data);
  *buf = uv_buf_init(o->buf, sizeof o->buf);
}

void on_read(uv_stream_t* stream, ssize_t n, const uv_buf_t* buf) {
  auto* o = static_cast<Output*>(stream->data);
  if (o == nullptr) return;
  if (n > 0) o->forward(std::string_view(buf->base, static_cast<std::size_t>(n)));
  else if (n < 0) o->finish();
}

// Starts the host's launch; its status when it cannot be started (the host then never joins).
int Head::start(Host& h) {
  std::vector<std::string> argv;
  if (!h.direct) {
    argv = job_.launch_agent;
    argv.push_back(h.name);
  }
  argv.push_back(job_.dtrain);
  argv.push_back("__remote");
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);

  h.in.init([&](uv_pipe_t* p) { return uv_pipe_init(&loop_, p, 0); }, &h);
  h.out.pipe.init([&](uv_pipe_t* p) { return uv_pipe_init(&loop_, p, 0); }, &h.out);
  h.err.pipe.init([&](uv_pipe_t* p) { return uv_pipe_init(&loop_, p, 0); }, &h.err);
  h.err.fd = STDERR_FILENO;
  h.err.joined = &h.joined;
  uv_stdio_container_t stdio[3];
  stdio[0].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_READABLE_PIPE);
  stdio[0].data.stream = reinterpret_cast<uv_stream_t*>(h.in.get());
  stdio[1].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_WRITABLE_PIPE);
  stdio[1].data.stream = reinterpret_cast<uv_stream_t*>(h.out.pipe.get());
  stdio[2].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_WRITABLE_PIPE);
  stdio[2].data.stream = reinterpret_cast<uv_stream_t*>(h.err.pipe.get());
  uv_process_options_t o{};
  o.file = cargv[0];
  o.args = cargv.data();
  o.exit_cb = [](uv_process_t* p, std::int64_t status, int sig) {
    auto* host = static_cast<Host*>(p->data);
    host->head->exited(*host, status, sig);
  };
  // a session of its own: Ctrl-C at the terminal reaches this process only, which tells every host
  o.flags = UV_PROCESS_DETACHED;
  o.stdio_count = 3;
  o.stdio = stdio;
  int rc = h.proc.init([&](uv_process_t* p) { return uv_spawn(&loop_, p, &o); }, &h, /*closes_on_failure=*/true);
  if (rc < 0) {
    say(fmt::format("host {} (node {}): cannot start {}: {}", h.name, h.rank, argv[0], uv_strerror(rc)));
    h.in.close();
    h.out.pipe.close();
    h.err.pipe.close();
    return rc == UV_ENOENT ? exit_code::not_found : exit_code::not_executable;
  }
  h.running = true;
  uv_read_start(reinterpret_cast<uv_stream_t*>(h.out.pipe.get()), on_alloc, on_read);
  uv_read_start(reinterpret_cast<uv_stream_t*>(h.err.pipe.get()), on_alloc, on_read);
  HeadHeader header{job_.token, job_.cwd, job_.words, h.rank, job_.env};
  send(h, encode_header(header));
  return exit_code::ok;
}

void Head::send(Host& h, std::string data) {
  if (!h.running || !h.in) return;
  auto* w = new WriteReq{{}, std::move(data)};
  uv_buf_t b = uv_buf_init(w->data.data(), static_cast<unsigned>(w->data.size()));
  int rc = uv_write(&w->req, reinterpret_cast<uv_stream_t*>(h.in.get()), &b, 1,
                    [](uv_write_t* r, int) { delete reinterpret_cast<WriteReq*>(r); });
  if (rc < 0) delete w;  // the host's launch is gone: its exit says so
}

void Head::exited(Host& h, std::int64_t status, int sig) {
  h.running = false;
  h.proc.close();
  h.in.close();
  // the launch agent's 255 (ssh: the connection failed) or a signal: no status of dtrain's
  const bool lost = sig != 0 || (!h.direct && status == 255);
  if (lost && h.killed)
    say(fmt::format("host {} (node {}) did not end: its launch was killed", h.name, h.rank));
  else if (lost && !told_)  // once told to stop, a launch ended by that signal is no loss to report
    say(fmt::format("host {} (node {}): {} ended {} without dtrain's status: the host or its connection was lost",
                    h.name, h.rank, h.direct ? "dtrain" : job_.launch_agent.front(),
                    sig != 0 ? fmt::format("by signal {}", sig) : fmt::format("with {}", status)));
  ended(h, static_cast<int>(status), lost);
}

// The host's launch is over (or never started): to the machine, saying so when the others are stopped for it.
void Head::ended(const Host& h, int status, bool lost) {
  if (!h.joined && (lost || status != exit_code::ok) && !told_ && !still_running().empty())
    say(fmt::format("host {} (node {}) ended before it joined the rendezvous: the other nodes would wait for it in "
                    "vain; stopping them", h.name, h.rank));
  apply(machine_.on_end(h.rank, status, lost, h.joined));
}

std::string Head::still_running() const {
  std::vector<std::string> names;
  for (const auto& h : hosts_)
    if (h->running) names.push_back(h->name);
  return text::join(names, ", ");
}

void Head::apply(const std::vector<HeadAction>& actions) {
  for (const HeadAction& a : actions) {
    switch (a.kind) {
      case HeadAction::send_signal:
        if (a.value == SIGTERM && !signals_.empty() && machine_.root_host() >= 0)
          say(fmt::format("stopping the hosts still running ({}): node {} ended", still_running(),
                          machine_.root_host()));
        told_ = true;
        for (auto& h : hosts_) send(*h, fmt::format("{}\n", a.value == SIGINT ? "INT" : a.value == SIGHUP ? "HUP" : "TERM"));
        break;
      case HeadAction::arm_timer:
        uv_timer_start(timer_.get(), [](uv_timer_t* t) {
          auto* head = static_cast<Head*>(t->data);
          head->apply(head->machine_.on_timer());
        }, static_cast<std::uint64_t>(job_.patience_s * 1000), 0);
        break;
      case HeadAction::kill_agents:
        say(fmt::format("hosts that did not stop ({}): killing their launch", still_running()));
        for (auto& h : hosts_)
          if (h->running) {
            h->killed = true;
            uv_process_kill(h->proc.get(), SIGKILL);
          }
        break;
      case HeadAction::finish:
        status_ = a.value;
        end_all();
        break;
    }
  }
}

// Every launch has ended: no more signals or timers; what output is left drains, briefly.
void Head::end_all() {
  for (auto& s : signals_) s.close();
  signals_.clear();
  uv_timer_stop(timer_.get());
  uv_timer_start(timer_.get(), [](uv_timer_t* t) {
    auto* head = static_cast<Head*>(t->data);
    for (auto& h : head->hosts_) {
      h->out.finish();
      h->err.finish();
    }
    head->timer_.close();
  }, kDrainMs, 0);
  uv_unref(timer_.handle());  // the loop ends as soon as the output has drained
}

int Head::run() {
  std::signal(SIGPIPE, SIG_IGN);
  timer_.init([&](uv_timer_t* t) { return uv_timer_init(&loop_, t); }, this);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    UvHandle<uv_signal_t> s;
    s.init([&](uv_signal_t* x) { return uv_signal_init(&loop_, x); }, this);
    uv_signal_start(s.get(), [](uv_signal_t* x, int signum) {
      auto* head = static_cast<Head*>(x->data);
      say(fmt::format("{}: telling every host", signum == SIGINT ? "interrupted" : strsignal(signum)));
      head->apply(head->machine_.on_signal(signum));
    }, sig);
    signals_.push_back(std::move(s));
  }
  for (std::size_t i = 0; i < job_.hosts.size(); ++i) {
    auto h = std::make_unique<Host>();
    h->head = this;
    h->rank = static_cast<int>(i);
    h->name = job_.hosts[i];
    h->direct = h->rank == job_.this_host;
    hosts_.push_back(std::move(h));
  }
  // every host is started before any that could not be is ended: the others are told to stop then
  std::vector<std::pair<int, int>> failed;
  for (auto& h : hosts_)
    if (int code = start(*h); code != exit_code::ok) failed.emplace_back(h->rank, code);
  for (auto [rank, code] : failed) ended(*hosts_[static_cast<std::size_t>(rank)], code, false);
  uv_run(&loop_, UV_RUN_DEFAULT);
  for (auto& h : hosts_) {  // output still open when the drain timer ended the loop
    h->out.finish();
    h->err.finish();
  }
  timer_.close();
  uv_run(&loop_, UV_RUN_DEFAULT);  // the close callbacks
  return status_.value_or(exit_code::node_lost);
}

}  // namespace

int run_head(const HeadJob& job) {
  Head head(job);
  return head.run();
}

}  // namespace dtrain::remote
