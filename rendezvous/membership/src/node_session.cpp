// NodeSession (node_session.hpp): the built-in backend's membership, over its collaborators: the
// join (node_join.cpp), the heartbeat thread (heartbeat.cpp), the watcher (event_watch.cpp) and the
// job events (job_events.cpp); here the session connection, reports and the exit barrier.
#include "dtrain/rendezvous/membership/node_session.hpp"

#include <utility>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/log.hpp"
#include "node_join.hpp"

namespace dtrain::rdzv {
namespace {

using std::chrono::milliseconds;
using wire::Frame;
using wire::Op;

constexpr milliseconds kGrace{15000};
constexpr milliseconds kOpTimeout{60000};

}  // namespace

NodeSession::NodeSession(NodeSessionOptions opts)
    : opts_(std::move(opts)),
      // the server declares a node lost after heartbeat_timeout of silence: no reply by then (and an
      // interval more) is the rendezvous lost, not a slow one
      heartbeat_(opts_.heartbeat_interval,
                 opts_.heartbeat_timeout.count() > 0 ? opts_.heartbeat_timeout + opts_.heartbeat_interval : kOpTimeout),
      watch_(events_) {
  check_options(opts_);
  if (opts_.node_rank >= opts_.instances)
    throw ConfigError(fmt::format("node rank {} is out of range for {} nodes (0-{})", opts_.node_rank, opts_.instances,
                                  opts_.instances - 1));
}

NodeSession::~NodeSession() { close_all(); }

JoinResult NodeSession::join(const ProgressFn& progress) {
  close_all();  // a second join replaces the first membership
  Joined j = join_rendezvous(opts_, cancel_, progress);
  events_.reset();
  {
    std::lock_guard lock(mu_);
    session_ = std::move(j.session);
    result_ = j.result;
  }
  const JoinReply& r = j.result.self;
  DTRAIN_INFO(rdzv, "joined run '{}' generation {} as node {} of {} (world size {}, master {}:{})", opts_.store.run_id,
              j.result.generation, r.node_rank, r.nnodes, r.world_size, r.master_addr, r.master_port);
  return j.result;
}

JoinResult NodeSession::rejoin(int generation, const ProgressFn& progress) {
  close_all();
  prepare_rejoin(opts_, result(), generation);
  return join(progress);
}

void NodeSession::cancel_join() { cancel_.cancel(); }

void NodeSession::start_monitoring(EventFn on_event) {
  DTRAIN_CHECK(session_ != nullptr, "start_monitoring before join");
  stop_monitoring();
  ClientOptions co = opts_.store;
  co.client_name = fmt::format("watcher {}", opts_.host);
  events_.set_handler(std::move(on_event));
  watch_.start(co);
  if (stacks_source_) {
    co.client_name = fmt::format("stacks {}", opts_.host);
    desk_.start(co, result().self.node_rank, stacks_source_);
  }
  heartbeat_.start(*session_, result().self.node_rank, [this, where = session_->endpoint()](const std::string& why) {
    events_.deliver(rendezvous_lost(where, why));
  });
}

void NodeSession::stop_monitoring() {
  heartbeat_.stop();
  watch_.stop();
  desk_.stop();
}

void NodeSession::close_all() {
  stop_monitoring();
  std::lock_guard lock(mu_);
  session_.reset();
}

void NodeSession::set_local_state(std::string state, int running, int exited, int restarts) {
  heartbeat_.set_state(std::move(state), running, exited, restarts);
}

void NodeSession::set_progress(std::string text) { heartbeat_.set_progress(std::move(text)); }

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
  heartbeat_.stop();
  // From now on losing the server is expected (node 0 stops it once every node left), and a fatal
  // event ends the LEAVE call at once. A failure or loss of this generation that already happened:
  // no barrier to wait for.
  std::optional<Event> cause = events_.enter_exit_barrier([s = session_.get()] { s->close(); }, true);
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

// The LEAVE request: nullopt once every node left, else the job event that ended the wait.
std::optional<Event> NodeSession::leave(milliseconds timeout) {
  try {
    session_->call(Frame(Op::leave).i64(timeout.count()), timeout + kGrace);
    return std::nullopt;
  } catch (const TimeoutError&) {
    throw;  // the server names the nodes that never finished
  } catch (const Error& e) {
    // Ended early: the watcher hears why at the same moment (the server fails the leavers and wakes
    // the watchers together; a root cause closes our connection), unless the server is gone.
    if (auto root = events_.wait_root_or_loss(kGrace)) return root;
    std::string where = session_->endpoint();
    throw NodeLostError(-1, where, fmt::format("lost the rendezvous at {} in the exit barrier: {}", where, e.what()));
  }
}

std::optional<Event> NodeSession::root_cause() const { return events_.root(); }

JoinResult NodeSession::result() const {
  std::lock_guard lock(mu_);
  return result_;
}

TcpStore& NodeSession::store() {
  DTRAIN_CHECK(session_ != nullptr, "store() before join");
  return *session_;
}

}  // namespace dtrain::rdzv
