// EtcdSession (etcd_session.hpp): the membership on etcd over its collaborators: the join
// (etcd_join.cpp), the lease (lease.cpp), the watch (generation_watch.cpp), the done keys
// (done_keys.cpp) and the job events; here the reports and the exit barrier.
#include "etcd_session.hpp"

#include <utility>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/log.hpp"

namespace dtrain::etcd {

using rdzv::Event;
using std::chrono::milliseconds;

EtcdSession::EtcdSession(std::shared_ptr<Client> client, rdzv::NodeSessionOptions opts)
    : client_(std::move(client)),
      opts_(std::move(opts)),
      keys_(opts_.store.run_id),
      lease_(*client_, opts_.heartbeat_interval, opts_.heartbeat_timeout),
      watch_(*client_, keys_, events_, done_) {
  rdzv::check_options(opts_);
}

EtcdSession::~EtcdSession() {
  stop_monitoring();
  lease_.end();
}

EtcdJoined EtcdSession::joined() const {
  std::lock_guard lock(mu_);
  return joined_;
}

rdzv::JoinResult EtcdSession::join(const rdzv::ProgressFn& progress) {
  stop_monitoring();
  lease_.end();  // a second join replaces the first membership
  EtcdJoined j = join_etcd(JoinContext{*client_, keys_, opts_, lease_, cancel_}, opts_.store.generation, progress);
  opts_.store.generation = j.result.generation;
  events_.reset();
  std::vector<std::pair<int, std::string>> nodes;
  for (const auto& row : j.table.rows) nodes.emplace_back(row.entry.node_rank, row.entry.host);
  done_.reset(std::move(nodes));
  {
    std::lock_guard lock(mu_);
    joined_ = j;
  }
  const rdzv::JoinReply& r = j.result.self;
  DTRAIN_INFO(rdzv, "joined run '{}' generation {} through etcd {} as node {} of {} (world size {}, master {}:{})",
              opts_.store.run_id, j.result.generation, endpoint(), r.node_rank, r.nnodes, r.world_size, r.master_addr,
              r.master_port);
  return j.result;
}

rdzv::JoinResult EtcdSession::rejoin(int generation, const rdzv::ProgressFn& progress) {
  rdzv::prepare_rejoin(opts_, result(), generation);
  return join(progress);
}

void EtcdSession::cancel_join() { cancel_.cancel(); }

void EtcdSession::start_monitoring(rdzv::EventFn on_event) {
  stop_monitoring();
  EtcdJoined j = joined();
  events_.set_handler(std::move(on_event));
  watch_.start(j.table, j.result.generation, j.table_revision, opts_.heartbeat_timeout);
  lease_.arm([this](const std::string& why) { events_.deliver(rdzv::rendezvous_lost("etcd " + endpoint(), why)); });
}

void EtcdSession::stop_monitoring() {
  lease_.disarm();
  watch_.stop();
}

void EtcdSession::post_event(Event e) {
  std::string key;
  {
    std::lock_guard lock(mu_);
    std::int64_t lease = lease_.id();
    DTRAIN_CHECK(lease != 0, "report before join");
    e.node = joined_.result.self.node_rank;
    e.generation = joined_.result.generation;
    key = keys_.events(joined_.result.generation) + Keys::lease_text(lease) + "-" + std::to_string(++event_count_);
  }
  e.host = opts_.host;
  if (e.message.size() > 4000) e.message.resize(4000);
  client_->put(key, encode_event(e));
}

void EtcdSession::report_failure(int rank, int exit_code, int signal, const std::string& message) {
  Event e;
  e.kind = "failure";
  e.rank = rank;
  e.exit_code = exit_code;
  e.signal = signal;
  e.message = message;
  post_event(std::move(e));
}

void EtcdSession::report_stop(int exit_code, int signal, const std::string& message) {
  Event e;
  e.kind = "stopped";
  e.exit_code = exit_code;
  e.signal = signal;
  e.message = message;
  post_event(std::move(e));
}

std::optional<Event> EtcdSession::finish(milliseconds timeout) {
  DTRAIN_CHECK(lease_.id() != 0, "finish before join");
  EtcdJoined j = joined();
  const std::int64_t g = j.result.generation;
  const int rank = j.result.self.node_rank;
  // a failure or loss of this generation that already happened: no barrier to wait for
  std::optional<Event> cause = events_.enter_exit_barrier([this] { done_.wake(); }, false);
  std::vector<std::string> missing;
  if (!cause) {
    try {
      client_->put(keys_.done(g) + std::to_string(rank), "1");
    } catch (const Error& e) {
      stop_monitoring();
      throw rdzv::NodeLostError(-1, "etcd " + endpoint(), fmt::format("lost etcd at {} in the exit barrier: {}", endpoint(), e.what()));
    }
    done_.mark(rank);
    done_.wait(timeout);
    cause = events_.root();
    if (!cause) missing = done_.missing();
  }
  stop_monitoring();
  if (!missing.empty())
    throw TimeoutError(fmt::format("exit barrier timed out after {:g} s: {} never finished",
                                   double(timeout.count()) / 1000.0, rdzv::list_text(missing)));
  if (cause && cause->kind == "lost") throw rdzv::NodeLostError(cause->node, cause->host, rdzv::describe_event(*cause));
  if (!cause) {
    if (rank == 0) {  // every node is done: the run's keys can go
      try {
        client_->erase(keys_.root, prefix_end(keys_.root));
      } catch (const Error& e) {
        DTRAIN_WARN(rdzv, "etcd {}: removing the keys of run '{}': {}", endpoint(), opts_.store.run_id, e.what());
      }
    }
    lease_.end();
  }
  return cause;
}

std::optional<Event> EtcdSession::root_cause() const { return events_.root(); }

rdzv::JoinResult EtcdSession::result() const { return joined().result; }

}  // namespace dtrain::etcd
