// The multi-node driver (multinode.hpp): serve or join the rendezvous, build this node's plan from
// the rank table, bridge job events between the NodeSession and the Agent, re-join on restarts and
// pass the exit barrier.
#include "dtrain/agent/multinode.hpp"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/exit_codes.hpp"
#include "dtrain/common/log.hpp"
#include "dtrain/common/net.hpp"
#include "dtrain/common/text.hpp"
#include "dtrain/rendezvous/auth.hpp"
#include "dtrain/rendezvous/node_session.hpp"
#include "dtrain/rendezvous/server.hpp"
#include "dtrain/rendezvous/wire.hpp"

namespace dtrain::agent {
namespace {

using std::chrono::milliseconds;

milliseconds seconds_ms(double s) { return milliseconds(static_cast<std::int64_t>(s * 1000.0 + 0.5)); }

void write_fd(int fd, std::string_view s) {
  while (!s.empty()) {
    ssize_t n = ::write(fd, s.data(), s.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    s.remove_prefix(static_cast<std::size_t>(n));
  }
}

// What every node must agree on: command, cluster shape, batch.
std::string spec_hash(const config::Plan& p) {
  std::string key = text::join(p.spec.command, "\x1f");
  key += fmt::format("\n{} {} {}", p.instances, p.procs_per_instance, p.world_size);
  if (p.batch) key += fmt::format("\n{} {} {}", p.batch->global, p.batch->micro_batches, p.batch->epochs);
  return fmt::format("{:016x}", text::fnv1a(key));
}

std::string host_name(const config::Plan& plan) {
  if (!plan.identity.host.empty()) return plan.identity.host;
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) == 0 && buf[0] != '\0') return buf;
  return "localhost";
}

// The waiting line while the join barrier is open: live on a terminal, else one line per change
// when progress is forced on.
class JoinLine {
 public:
  JoinLine(int mode, int fd) : fd_(fd), tty_(::isatty(fd) == 1), on_(mode == 1 || (mode == -1 && tty_)) {}
  void show(const rdzv::JoinProgress& p) {
    if (!on_) return;
    std::string line = p.line();
    if (tty_) {
      write_fd(fd_, "\r\x1b[Kdtrain: " + line);
      shown_ = true;
      return;
    }
    std::string key = fmt::format("{}/{} {}", p.joined, p.instances, p.missing);
    if (key == last_) return;
    last_ = key;
    write_fd(fd_, "dtrain: " + line + "\n");
  }
  void clear() {
    if (shown_) write_fd(fd_, "\r\x1b[K");
    shown_ = false;
  }

 private:
  int fd_;
  bool tty_, on_, shown_ = false;
  std::string last_;
};

class Driver {
 public:
  Driver(AgentOptions o, const MultiNodeOptions& mn) : opt_(std::move(o)), mn_(mn), line_(opt_.progress, opt_.output.stderr_fd) {}
  ~Driver() {
    {
      std::lock_guard lk(mu_);
      agent_done_ = true;
    }
    cv_.notify_all();
    if (control_.joinable()) control_.join();
    session_.reset();
    if (server_) server_->stop();
  }
  int run();

 private:
  void setup();
  rdzv::NodeSessionOptions session_options(int generation, int node_rank) const;
  rdzv::JoinResult join(rdzv::NodeSession& s);
  void apply_first(const rdzv::JoinResult& r);
  void check_same(const rdzv::JoinResult& r) const;
  void monitor(rdzv::NodeSession& s, int generation);
  void report_agent_failure(int code);
  void on_session_event(const rdzv::Event& e, int generation);
  void control_loop();
  void exit_watch(int generation);
  void say(const std::string& s) { write_fd(opt_.output.stderr_fd, "dtrain: " + s + "\n"); }

  AgentOptions opt_;
  MultiNodeOptions mn_;
  JoinLine line_;
  net::HostPort ep_{};
  std::string endpoint_, token_, host_, hash_, run_id_;
  milliseconds join_timeout_{600000}, hb_{5000}, hb_timeout_{15000};
  std::unique_ptr<rdzv::Server> server_;
  std::unique_ptr<Agent> agent_;
  int node_rank_ = -1;
  int rank_offset_ = 0, world_size_ = 0;

  std::thread control_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::unique_ptr<rdzv::NodeSession> session_;  // replaced by the control thread on each restart
  int cur_gen_ = 0, pending_gen_ = 0;
  int handled_gen_ = -1;      // generation whose root cause was already acted on
  int stopping_self_ = -1;    // generation this node stopped on its own (signal, max_runtime_s)
  bool agent_done_ = false, in_join_ = false, finishing_ = false;
  struct Report {
    WorkerExit w;
    int generation;
  };
  std::deque<Report> reports_;
  // a job failure heard after this node's workers all succeeded (or during the exit barrier)
  std::optional<int> late_code_;
  std::string late_reason_;
  rdzv::TcpStore* exit_watcher_ = nullptr;  // open while the exit barrier runs
  bool exit_watch_stop_ = false;
};

// While this node waits in the exit barrier (its workers all succeeded), a failure or loss on
// another node must still end the wait: watch the job's events on a connection of our own.
void Driver::exit_watch(int generation) {
  std::unique_ptr<rdzv::TcpStore> w;
  try {
    rdzv::ClientOptions co = session_options(generation, node_rank_).store;
    co.client_name = fmt::format("exit watcher {}", host_);
    co.connect_timeout = milliseconds(10000);
    w = rdzv::connect_store(co);
  } catch (const std::exception& e) {
    DTRAIN_WARN(agent, "exit barrier: cannot watch the job's events: {}", e.what());
    return;
  }
  {
    std::lock_guard lk(mu_);
    if (exit_watch_stop_) return;
    exit_watcher_ = w.get();
  }
  std::int64_t after = 0;
  for (;;) {
    try {
      rdzv::wire::Frame r =
          w->call(rdzv::wire::Frame(rdzv::wire::Op::watch).i64(after).i64(30000), milliseconds(45000));
      rdzv::Event e = rdzv::unpack_event(r.bytes_at(0));
      after = std::max(after, e.seq);
      if (e.kind == "failure" || e.kind == "lost") {
        on_session_event(e, generation);
        break;
      }
    } catch (const TimeoutError&) {
      continue;
    } catch (const std::exception&) {
      break;  // closed by run(), or the rendezvous is gone (the barrier call says which)
    }
  }
  std::lock_guard lk(mu_);
  exit_watcher_ = nullptr;
}

void Driver::setup() {
  auto& plan = opt_.plan;
  const auto& rs = plan.spec.rendezvous;
  endpoint_ = plan.rdzv_endpoint;
  ep_ = net::parse_host_port(endpoint_, "rendezvous endpoint");
  run_id_ = plan.run_id;
  host_ = host_name(plan);
  hash_ = spec_hash(plan);
  join_timeout_ = seconds_ms(rs.join_timeout_s);
  hb_ = seconds_ms(rs.heartbeat_s);
  hb_timeout_ = seconds_ms(rs.heartbeat_timeout_s.value_or(3 * rs.heartbeat_s));

  token_ = rdzv::auth::resolve_token(rs.token_file.value_or(""));
  if (token_.empty() && !mn_.insecure && (plan.instances > 1 || !net::is_loopback_host(ep_.host)))
    throw ConfigError(fmt::format(
        "this job spans {} node(s) through the rendezvous {} but has no token; set rendezvous.token_file, "
        "--token-file FILE or DTRAIN_RDZV_TOKEN (the same on every node), or pass --insecure on a trusted network",
        plan.instances, endpoint_));

  auto src = plan.identity.field_sources.find("node_rank");
  bool rank_known = src != plan.identity.field_sources.end() && src->second != "default";
  node_rank_ = rank_known ? plan.identity.node_rank : -1;

  // Serve when we may be node 0 and the endpoint's address is ours and free.
  if (node_rank_ <= 0) {
    int err = net::bind_probe(ep_.host, ep_.port);
    if (err == 0) {
      rdzv::ServerOptions so;
      so.host = ep_.host;
      so.port = ep_.port;
      so.token = token_;
      so.insecure = mn_.insecure;
      so.run_id = run_id_;
      server_ = std::make_unique<rdzv::Server>(so);
      try {
        server_->start();
        DTRAIN_INFO(agent, "serving the rendezvous on {} for run '{}'", server_->endpoint(), run_id_);
      } catch (const IoError& e) {
        // another agent of this machine bound it first (node ranks not given): join it
        if (net::bind_probe(ep_.host, ep_.port) != EADDRINUSE) throw;
        DTRAIN_INFO(agent, "not serving the rendezvous {}: {}", endpoint_, e.what());
        server_.reset();
      }
    } else if (node_rank_ == 0) {
      DTRAIN_INFO(agent, "not serving the rendezvous {} ({}): joining it", endpoint_, errno_text(err));
    }
  }
}

rdzv::NodeSessionOptions Driver::session_options(int generation, int node_rank) const {
  rdzv::NodeSessionOptions so;
  so.store.host = ep_.host;
  so.store.port = ep_.port;
  so.store.token = token_;
  so.store.run_id = run_id_;
  so.store.generation = generation;
  so.store.connect_timeout = join_timeout_;
  so.store.client_name = fmt::format("agent {}", host_);
  so.host = host_;
  so.node_rank = node_rank;
  so.slots = opt_.plan.procs_per_instance;
  so.instances = opt_.plan.instances;
  so.spec_hash = hash_;
  so.join_timeout = join_timeout_;
  so.heartbeat_interval = hb_;
  so.heartbeat_timeout = hb_timeout_;
  return so;
}

rdzv::JoinResult Driver::join(rdzv::NodeSession& s) {
  try {
    auto r = s.join([this](const rdzv::JoinProgress& p) { line_.show(p); });
    line_.clear();
    return r;
  } catch (const IoError& e) {
    line_.clear();
    throw TimeoutError(fmt::format("joining the rendezvous at {}: {}", endpoint_, e.what()));
  } catch (...) {
    line_.clear();
    throw;
  }
}

void Driver::apply_first(const rdzv::JoinResult& r) {
  auto& p = opt_.plan;
  node_rank_ = r.self.node_rank;
  rank_offset_ = r.self.rank_offset;
  world_size_ = r.self.world_size;
  p.identity.node_rank = r.self.node_rank;
  p.identity.instances = r.self.nnodes;
  p.identity.master_addr = r.self.master_addr;
  p.instances = r.self.nnodes;
  p.world_size = r.self.world_size;
  p.ranks.clear();
  for (const auto& n : r.table)
    for (int l = 0; l < n.slots; ++l) p.ranks.push_back({n.rank_offset + l, n.node_rank, l});
  std::sort(p.ranks.begin(), p.ranks.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  opt_.plan_json = config::plan_to_json(p);
  opt_.embed_store = false;
  opt_.store_addr = endpoint_;
  opt_.store_token = token_;
  opt_.local_addr = r.local_address;
  opt_.master_port = r.self.master_port;
  opt_.external_start = true;
}

void Driver::check_same(const rdzv::JoinResult& r) const {
  if (r.self.node_rank != node_rank_ || r.self.rank_offset != rank_offset_ || r.self.world_size != world_size_)
    throw ConfigError(fmt::format("generation {}: the rank table changed (node {} offset {} world {}, was node {} "
                                  "offset {} world {})",
                                  r.generation, r.self.node_rank, r.self.rank_offset, r.self.world_size, node_rank_,
                                  rank_offset_, world_size_));
}

// The agent ended in failure with no worker to blame and no job event behind it (the command does
// not exist or is not executable on this node): tell the other nodes, as rank -1, so that they stop
// with this cause instead of restarting or seeing this node as lost.
void Driver::report_agent_failure(int code) {
  rdzv::NodeSession* s = nullptr;
  {
    std::lock_guard lk(mu_);
    if (handled_gen_ >= cur_gen_ || stopping_self_ >= cur_gen_ || !session_) return;
    handled_gen_ = cur_gen_;
    s = session_.get();
  }
  try {
    s->report_failure(-1, code, 0, agent_->result().reason);
  } catch (const std::exception& ex) {
    DTRAIN_WARN(agent, "cannot report this node's failure to the rendezvous: {}", ex.what());
  }
}

void Driver::monitor(rdzv::NodeSession& s, int generation) {
  s.start_monitoring([this, generation](const rdzv::Event& e) { on_session_event(e, generation); });
}

// Watcher thread: the first failure or loss of a generation decides the job's fate everywhere.
void Driver::on_session_event(const rdzv::Event& e, int generation) {
  if (e.kind != "failure" && e.kind != "lost") return;
  Event ev;
  ev.node_rank = e.node;
  if (e.kind == "failure") {
    if (e.node == node_rank_) {
      std::lock_guard lk(mu_);
      handled_gen_ = std::max(handled_gen_, generation);
      return;  // our own worker: the agent is already stopping with it as the root cause
    }
    // rank -1: that node's agent itself failed before any worker ran (its command cannot be
    // executed there); a restart cannot mend that, so every node ends with its status.
    ev.kind = e.rank < 0 ? Event::Kind::abort : Event::Kind::peer_failed;
    ev.exit_code = e.signal != 0 ? exit_code::signal_base + e.signal : e.exit_code;
    ev.reason = "root cause: " + rdzv::describe_event(e);
  } else {
    ev.kind = Event::Kind::node_lost;
    ev.exit_code = exit_code::node_lost;
    ev.reason = e.node < 0 ? fmt::format("lost the rendezvous at {} (node 0's agent or the rendezvous host is gone): {}",
                                       endpoint_, e.message)
                           : rdzv::describe_event(e);
  }
  {
    std::lock_guard lk(mu_);
    if (handled_gen_ >= generation || stopping_self_ >= generation) return;
    handled_gen_ = generation;
    if (agent_done_) {
      if (!late_code_) {
        late_code_ = ev.exit_code != 0 ? ev.exit_code : 1;
        late_reason_ = ev.reason;
      }
      if (finishing_ && session_) session_->store().close();  // breaks the exit barrier
      return;
    }
  }
  agent_->post(ev);
}

void Driver::control_loop() {
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return agent_done_ || !reports_.empty() || pending_gen_ > cur_gen_; });
    if (!reports_.empty()) {  // before anything else: the other nodes must hear of our failure
      Report rep = reports_.front();
      reports_.pop_front();
      if (rep.generation != cur_gen_ || !session_) continue;
      rdzv::NodeSession* s = session_.get();
      lk.unlock();
      try {
        std::string msg = fmt::format("local rank {}, pid {}", rep.w.local_rank, rep.w.pid);
        s->report_failure(rep.w.rank, rep.w.signal != 0 ? 0 : rep.w.status(), rep.w.signal, msg);
      } catch (const std::exception& ex) {
        DTRAIN_WARN(agent, "cannot report the failure of rank {} to the rendezvous: {}", rep.w.rank, ex.what());
      }
      lk.lock();
      continue;
    }
    if (agent_done_) return;
    // the agent waits in `starting` for generation pending_gen_: re-join under it
    int g = pending_gen_;
    std::unique_ptr<rdzv::NodeSession> old = std::move(session_);
    in_join_ = true;
    lk.unlock();
    old.reset();  // stops its threads and closes its connections
    Event fail;
    fail.kind = Event::Kind::abort;
    try {
      auto s = std::make_unique<rdzv::NodeSession>(session_options(g, node_rank_));
      rdzv::JoinResult r = join(*s);
      check_same(r);
      rdzv::NodeSession* sp = s.get();
      lk.lock();
      session_ = std::move(s);
      cur_gen_ = g;
      in_join_ = false;
      lk.unlock();
      monitor(*sp, g);
      agent_->post(Event::go(g, r.self.master_port));
      lk.lock();
      continue;
    } catch (const std::exception& e) {
      fail.exit_code = exit_status_of(e);
      fail.reason = e.what();
    }
    fail.reason = fmt::format("re-joining the rendezvous for generation {}: {}", g, fail.reason);
    agent_->post(fail);
    lk.lock();
    in_join_ = false;
    cur_gen_ = g;
  }
}

int Driver::run() {
  setup();
  auto first = std::make_unique<rdzv::NodeSession>(session_options(0, node_rank_));
  rdzv::JoinResult r = join(*first);
  apply_first(r);
  DTRAIN_INFO(agent, "node {} of {}: ranks {}-{} of {}, master {}:{}", node_rank_, r.self.nnodes, rank_offset_,
              rank_offset_ + r.self.slots - 1, world_size_, r.self.master_addr, r.self.master_port);

  AgentHooks hooks;
  hooks.on_state = [this](JobState s, int g) {
    std::lock_guard lk(mu_);
    if (s == JobState::starting && g > pending_gen_) pending_gen_ = g;
    // stopping with no job event and no local failure: a signal or max_runtime_s stops this node;
    // its own exit status stands (a later loss of the rendezvous is a consequence, not a cause)
    if (s == JobState::stopping && handled_gen_ < g) stopping_self_ = g;
    if (s == JobState::done) agent_done_ = true;
    if (session_ && !in_join_)
      session_->set_local_state(state_name(s), s == JobState::running ? opt_.plan.procs_per_instance : 0, 0, g);
    cv_.notify_all();
  };
  hooks.on_local_failure = [this](const WorkerExit& w, int g) {
    std::lock_guard lk(mu_);
    handled_gen_ = std::max(handled_gen_, g);
    reports_.push_back({w, g});
    cv_.notify_all();
  };
  agent_ = std::make_unique<Agent>(opt_, hooks);
  {
    std::lock_guard lk(mu_);
    session_ = std::move(first);
  }
  monitor(*session_, 0);
  agent_->post(Event::go(0, r.self.master_port));
  control_ = std::thread([this] { control_loop(); });

  int code = agent_->run();
  bool stuck_in_join;
  {
    std::lock_guard lk(mu_);
    agent_done_ = true;
    stuck_in_join = in_join_;
  }
  cv_.notify_all();
  if (stuck_in_join) {
    // interrupted while re-joining: nothing of ours runs any more; the blocked join cannot be broken
    std::fflush(nullptr);
    std::_Exit(code);
  }
  control_.join();
  if (code != exit_code::ok) report_agent_failure(code);

  if (code == exit_code::ok) {
    {
      std::lock_guard lk(mu_);
      finishing_ = !late_code_.has_value();
    }
    std::thread watcher;
    if (finishing_) watcher = std::thread([this] { exit_watch(cur_gen_); });
    if (finishing_) {
      try {
        // as long as the slowest node runs: a failure or a lost node ends the wait sooner
        auto limit = std::chrono::duration_cast<milliseconds>(std::chrono::hours(24 * 7));
        if (opt_.max_runtime_s) limit = seconds_ms(*opt_.max_runtime_s) + join_timeout_;
        session_->finish(limit);
      } catch (const TimeoutError& e) {
        std::lock_guard lk(mu_);
        if (!late_code_) {
          late_code_ = exit_code::rdzv_timeout;
          late_reason_ = e.what();
        }
      } catch (const std::exception& e) {
        std::lock_guard lk(mu_);
        if (!late_code_) {
          std::string what = e.what();
          late_code_ = what.find("lost") != std::string::npos ? exit_code::node_lost : exit_code::internal;
          late_reason_ = fmt::format("exit barrier: {}", what);
        }
      }
    }
    if (watcher.joinable()) {
      {
        std::lock_guard lk(mu_);
        exit_watch_stop_ = true;
        if (exit_watcher_ != nullptr) exit_watcher_->close();
      }
      watcher.join();
    }
    std::lock_guard lk(mu_);
    if (late_code_) {
      code = *late_code_;
      say(fmt::format("the job failed after this node's workers finished (exit status {}): {}", code, late_reason_));
    }
  }
  return code;
}

}  // namespace

bool is_multinode(const config::Plan& plan) { return plan.instances > 1 || !plan.rdzv_endpoint.empty(); }

int run_multinode(AgentOptions options, const MultiNodeOptions& mn) {
  Driver d(std::move(options), mn);
  return d.run();
}

}  // namespace dtrain::agent
