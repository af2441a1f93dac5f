// NodeSession: the agent's side of the join barrier, heartbeats, job events and exit barrier.
#include "dtrain/rendezvous/membership/node_session.hpp"

#include <unistd.h>

#include <exception>
#include <utility>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/log.hpp"
#include "dtrain/common/net.hpp"
#include "dtrain/rendezvous/membership/run_status.hpp"

namespace dtrain::rdzv {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using wire::Frame;
using wire::Op;

constexpr milliseconds kGrace{15000};
constexpr milliseconds kWatchSlice{30000};
constexpr milliseconds kOpTimeout{60000};

}  // namespace

NodeSession::NodeSession(NodeSessionOptions opts)
    : opts_(std::move(opts)), join_cancel_(std::make_shared<Canceller>()) {
  check_options(opts_);
  if (opts_.node_rank >= opts_.instances)
    throw ConfigError(fmt::format("node rank {} is out of range for {} nodes (0-{})", opts_.node_rank, opts_.instances,
                                  opts_.instances - 1));
}

NodeSession::~NodeSession() { close_all(); }

// Connects the join's connection and registers it for cancel_join().
std::unique_ptr<TcpStore> NodeSession::connect_for_join(const ClientOptions& co) {
  auto cancelled = [&] {
    return Cancelled(fmt::format("joining the rendezvous at {}: cancelled", net::endpoint_text(co.host, co.port)));
  };
  {
    std::lock_guard lock(mu_);
    if (join_cancelled_) throw cancelled();
  }
  auto conn = connect_store(co);
  std::lock_guard lock(mu_);
  if (join_cancelled_) throw cancelled();
  joining_ = conn.get();
  return conn;
}

// The join request and the rank table on `conn`; the progress frames feed `progress`.
JoinResult NodeSession::run_join(TcpStore& conn, const ProgressFn& progress) {
  std::string local = conn.local_address();
  std::string advertise = opts_.advertise_addr.empty() ? local : opts_.advertise_addr;
  int mport = opts_.master_port > 0 ? opts_.master_port : net::pick_free_port(advertise);
  Frame req(Op::join);
  req.str(opts_.host)
      .i64(opts_.node_rank)
      .i64(opts_.slots)
      .i64(opts_.instances)
      .str(opts_.spec_hash)
      .i64(mport)
      .str(advertise)
      .i64(opts_.heartbeat_timeout.count())
      .i64(opts_.join_timeout.count())
      .i64(opts_.min_instances)
      .i64(opts_.last_call.count());
  auto start = Clock::now();
  auto on_progress = [&](const Frame& f) {
    if (!progress) return;
    JoinProgress p;
    p.joined = int(f.i64_at(0));
    p.instances = int(f.i64_at(1));
    p.missing = std::string(f.str_at(2));
    p.endpoint = conn.endpoint();
    p.elapsed = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
    p.timeout = opts_.join_timeout;
    progress(p);
  };
  JoinResult r;
  try {
    Frame reply = conn.call(req, opts_.join_timeout + kGrace, on_progress);
    r.self = unpack_join_reply(reply.bytes_at(0));
    if (opts_.fetch_table) {
      Frame t = conn.call(Frame(Op::table), kOpTimeout);
      r.table.reserve(t.args.size());
      for (const auto& a : t.args) r.table.push_back(unpack_node_entry(a));
    }
  } catch (const wire::ProtocolError& e) {
    throw IoError(fmt::format("rendezvous {}: bad join reply: {}", conn.endpoint(), e.what()));
  }
  r.local_address = local;
  return r;
}

// One JOIN on a fresh connection, which becomes `conn` when it succeeds.
JoinResult NodeSession::join_once(const ClientOptions& co, const ProgressFn& progress, std::unique_ptr<TcpStore>& conn) {
  auto c = connect_for_join(co);
  JoinResult r;
  std::exception_ptr failed;
  try {
    r = run_join(*c, progress);
    r.generation = co.generation;
  } catch (...) {
    failed = std::current_exception();
  }
  {
    std::lock_guard lock(mu_);
    joining_ = nullptr;
    // a failure (or a success that raced the close) is cancel_join's doing: say so
    if (join_cancelled_) throw Cancelled(fmt::format("joining the rendezvous at {}: cancelled", c->endpoint()));
  }
  if (failed) std::rethrow_exception(failed);
  conn = std::move(c);
  return r;
}

JoinResult NodeSession::join(const ProgressFn& progress) {
  close_all();  // a second join replaces the first membership
  ClientOptions co = opts_.store;
  if (co.client_name.empty()) co.client_name = fmt::format("agent {}", opts_.host);
  // Other nodes may start long before node 0 serves the store: keep trying for the join timeout.
  co.connect_timeout = std::max(co.connect_timeout, opts_.join_timeout);
  co.cancel = join_cancel_;
  if (progress)
    co.on_retry = [&](milliseconds elapsed, const std::string& why) {
      JoinProgress p;
      p.reachable = false;
      p.endpoint = net::endpoint_text(co.host, co.port);
      p.why = why;
      p.instances = opts_.instances;
      p.elapsed = elapsed;
      p.timeout = opts_.join_timeout;
      progress(p);
    };
  // an elastic job's rendezvous may send us on to the generation that gathers nodes (a few hops at most)
  std::unique_ptr<TcpStore> conn;
  JoinResult r;
  for (int hop = 0;; ++hop) {
    try {
      r = join_once(co, progress, conn);
      break;
    } catch (const Moved& m) {
      if (hop >= 8 || m.generation <= co.generation) throw;
      DTRAIN_INFO(rdzv, "rendezvous {}: {}", net::endpoint_text(co.host, co.port), m.what());
      co.generation = int(m.generation);
      opts_.store.generation = co.generation;
    }
  }
  {
    std::lock_guard lock(mu_);
    session_ = std::move(conn);
    result_ = r;
    root_.reset();
    last_seq_ = 0;
    finished_ = false;
    in_barrier_ = false;
    server_lost_emitted_ = false;
  }
  DTRAIN_INFO(rdzv, "joined run '{}' generation {} as node {} of {} (world size {}, master {}:{})", co.run_id,
              co.generation, r.self.node_rank, r.self.nnodes, r.self.world_size, r.self.master_addr, r.self.master_port);
  return r;
}

JoinResult NodeSession::rejoin(int generation, const ProgressFn& progress) {
  close_all();
  prepare_rejoin(opts_, result_, generation);
  return join(progress);
}

void NodeSession::cancel_join() {
  std::lock_guard lock(mu_);
  join_cancelled_ = true;
  join_cancel_->raise();                    // connect retries and the handshake
  if (joining_ != nullptr) joining_->close();  // the join barrier itself
}

void NodeSession::start_monitoring(EventFn on_event) {
  DTRAIN_CHECK(session_ != nullptr, "start_monitoring before join");
  stop_monitoring();
  ClientOptions co = opts_.store;
  co.client_name = fmt::format("watcher {}", opts_.host);
  watcher_ = connect_store(co);
  {
    std::lock_guard lock(mu_);
    threads_.hb_stop = threads_.watch_stop = false;
    threads_.watch_ended = false;
    on_event_ = std::move(on_event);
  }
  threads_.watch = std::thread([this] { watch_loop(); });
  threads_.heartbeat = std::thread([this] { heartbeat_loop(); });
}

void NodeSession::stop_heartbeats() {
  {
    std::lock_guard lock(mu_);
    threads_.hb_stop = true;
  }
  cv_.notify_all();
  if (threads_.heartbeat.joinable()) threads_.heartbeat.join();
}

void NodeSession::stop_monitoring() {
  stop_heartbeats();
  {
    std::lock_guard lock(mu_);
    threads_.watch_stop = true;
  }
  if (watcher_) watcher_->close();
  if (threads_.watch.joinable()) threads_.watch.join();
  watcher_.reset();
}

void NodeSession::close_all() {
  stop_monitoring();
  std::lock_guard lock(mu_);
  session_.reset();
}

void NodeSession::set_local_state(std::string state, int running, int exited, int restarts) {
  std::lock_guard lock(mu_);
  local_.state = std::move(state);
  local_.running = running;
  local_.exited = exited;
  local_.restarts = restarts;
}

void NodeSession::set_progress(std::string text) {
  std::lock_guard lock(mu_);
  local_.progress = std::move(text);
}

void NodeSession::report(int rank, int exit_code, int signal, const std::string& message, const char* kind) {
  TcpStore* s;
  int node;
  {
    std::lock_guard lock(mu_);
    s = session_.get();
    node = result_.self.node_rank;
  }
  DTRAIN_CHECK(s != nullptr, "report before join");
  Frame f(Op::report);
  f.i64(node).i64(rank).i64(exit_code).i64(signal).str(message.substr(0, 4000));
  if (kind != nullptr) f.str(kind);
  s->call(f, kOpTimeout);
}

void NodeSession::report_failure(int rank, int exit_code, int signal, const std::string& message) {
  report(rank, exit_code, signal, message, nullptr);
}

void NodeSession::report_stop(int exit_code, int signal, const std::string& message) {
  report(-1, exit_code, signal, message, "stopped");
}

std::optional<Event> NodeSession::finish(milliseconds timeout) {
  DTRAIN_CHECK(session_ != nullptr, "finish before join");
  stop_heartbeats();
  std::optional<Event> cause;
  {
    std::lock_guard lock(mu_);
    finished_ = true;  // from now on losing the server is expected (node 0 stops it)
    in_barrier_ = true;
    cause = root_;     // a failure or loss of this generation already happened: no barrier to wait for
  }
  try {
    if (!cause) cause = leave(timeout);
  } catch (...) {
    stop_monitoring();
    throw;
  }
  stop_monitoring();
  if (cause && cause->kind == "lost") throw NodeLostError(cause->node, cause->host, describe_event(*cause));
  return cause;
}

// The leave request: nullopt once every node left, else the job event that ended the wait.
std::optional<Event> NodeSession::leave(milliseconds timeout) {
  try {
    session_->call(Frame(Op::leave).i64(timeout.count()), timeout + kGrace);
    return std::nullopt;
  } catch (const TimeoutError&) {
    throw;  // the server names the nodes that never finished
  } catch (const Error& e) {
    // Ended early: the watcher hears why at the same moment (the server fails the leavers and wakes
    // the watchers together; emit() closes our connection on a failure), unless the server is gone.
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, kGrace, [&] { return root_.has_value() || threads_.watch_ended; });
    if (root_) return root_;
    std::string where = session_->endpoint();
    throw NodeLostError(-1, where, fmt::format("lost the rendezvous at {} in the exit barrier: {}", where, e.what()));
  }
}

std::optional<Event> NodeSession::root_cause() const {
  std::lock_guard lock(mu_);
  return root_;
}

JoinResult NodeSession::result() const {
  std::lock_guard lock(mu_);
  return result_;
}

TcpStore& NodeSession::store() {
  DTRAIN_CHECK(session_ != nullptr, "store() before join");
  return *session_;
}

void NodeSession::emit(const Event& e) {
  std::lock_guard serial(emit_mu_);
  EventFn fn;
  {
    std::lock_guard lock(mu_);
    if (e.seq > 0) {
      if (e.seq <= last_seq_) return;
      last_seq_ = e.seq;
    } else {
      if (server_lost_emitted_ || finished_) return;
      server_lost_emitted_ = true;
    }
    if (!root_ && (e.kind == "failure" || e.kind == "stopped" || e.kind == "lost")) {
      root_ = e;
      if (in_barrier_ && session_) session_->close();  // ends the leave call at once
      cv_.notify_all();
    }
    fn = on_event_;
  }
  if (fn) {
    try {
      fn(e);
    } catch (const std::exception& ex) {
      DTRAIN_WARN(rdzv, "job event callback threw: {}", ex.what());
    }
  }
}

void NodeSession::heartbeat_loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait_for(lock, opts_.heartbeat_interval, [&] { return threads_.hb_stop; });
    if (threads_.hb_stop) return;
    Frame hb(Op::heartbeat);
    hb.str(local_.state).i64(local_.running).i64(local_.exited).i64(local_.restarts);
    TcpStore* s = session_.get();
    std::optional<std::string> progress = std::exchange(local_.progress, std::nullopt);
    int node = result_.self.node_rank;
    lock.unlock();
    try {
      s->call(hb, kOpTimeout);
      if (progress) s->set(progress_key(node), as_bytes(*progress));
    } catch (const Error& e) {
      lock.lock();
      if (threads_.hb_stop) return;
      lock.unlock();
      emit(rendezvous_lost(s->endpoint(), fmt::format("heartbeat to the rendezvous failed: {}", e.what())));
      return;
    }
    lock.lock();
  }
}

void NodeSession::watch_loop() {
  TcpStore* w = watcher_.get();
  for (;;) {
    std::int64_t after;
    {
      std::lock_guard lock(mu_);
      if (threads_.watch_stop) return;
      after = last_seq_;
    }
    try {
      Frame r = w->call(Frame(Op::watch).i64(after).i64(kWatchSlice.count()), kWatchSlice + kGrace);
      emit(unpack_event(r.bytes_at(0)));
    } catch (const TimeoutError&) {
      continue;
    } catch (const std::exception& e) {
      {
        std::lock_guard lock(mu_);
        if (threads_.watch_stop) return;
        threads_.watch_ended = true;
      }
      cv_.notify_all();
      emit(rendezvous_lost(w->endpoint(), fmt::format("lost the connection to the rendezvous: {}", e.what())));
      return;
    }
  }
}

}  // namespace dtrain::rdzv
