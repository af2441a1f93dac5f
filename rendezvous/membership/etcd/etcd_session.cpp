// EtcdSession (etcd_session.hpp): lease, monitoring, reports and the exit barrier. The join barrier
// is in etcd_join.cpp.
#include "etcd_session.hpp"

#include <utility>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/log.hpp"

namespace dtrain::etcd {

using Clock = std::chrono::steady_clock;
using rdzv::Event;
using std::chrono::milliseconds;

namespace {

constexpr milliseconds kWatchSlice{1000};
constexpr std::chrono::seconds kNoTimeoutTtl{60};  // heartbeat_timeout 0: never lost for silence, as far as etcd allows

bool fatal(const Event& e) { return e.kind == "failure" || e.kind == "stopped" || e.kind == "lost"; }

}  // namespace

EtcdSession::EtcdSession(std::shared_ptr<Client> client, rdzv::NodeSessionOptions opts)
    : client_(std::move(client)), opts_(std::move(opts)), keys_(opts_.store.run_id) {
  rdzv::check_options(opts_);
}

EtcdSession::~EtcdSession() {
  stop_monitoring();
  end_lease();
}

// The generation to join for `wanted`: the run's gen key created or raised to it; an elastic job
// joins the later one when its nodes gather there already.
std::int64_t EtcdSession::target_generation(std::int64_t wanted) {
  TxnResult r = client_->txn({{keys_.gen(), Compare::Target::create, Compare::Result::equal, 0, {}}},
                             {Op::put(keys_.gen(), std::to_string(wanted))}, {Op::range(keys_.gen())});
  if (r.succeeded) return wanted;
  std::int64_t now = parse_generation(r.ranges.at(0).kvs.at(0).value);
  bool elastic = opts_.min_instances > 0 && opts_.min_instances < opts_.instances;
  std::int64_t g = elastic ? std::max(now, wanted) : wanted;
  raise_generation(g);
  return g;
}

void EtcdSession::raise_generation(std::int64_t to) {
  for (;;) {
    RangeResult r = client_->range(keys_.gen());
    if (!r.kvs.empty() && parse_generation(r.kvs[0].value) >= to) return;
    std::int64_t mod = r.kvs.empty() ? 0 : r.kvs[0].mod_revision;
    Compare::Target target = r.kvs.empty() ? Compare::Target::create : Compare::Target::mod;
    if (client_->txn({{keys_.gen(), target, Compare::Result::equal, mod, {}}}, {Op::put(keys_.gen(), std::to_string(to))})
            .succeeded)
      return;
  }
}

void EtcdSession::start_lease() {
  end_lease();
  auto ttl = opts_.heartbeat_timeout.count() > 0
                 ? std::chrono::ceil<std::chrono::seconds>(opts_.heartbeat_timeout)
                 : kNoTimeoutTtl;
  std::int64_t lease = client_->lease_grant(std::max(ttl, std::chrono::seconds(2)));
  std::lock_guard lock(mu_);
  lease_ = lease;
  keeper_stop_ = false;
  keeper_ = std::thread([this] { keeper_loop(); });
}

void EtcdSession::end_lease() {
  std::int64_t lease;
  {
    std::lock_guard lock(mu_);
    keeper_stop_ = true;
    lease = std::exchange(lease_, 0);
  }
  cv_.notify_all();
  if (keeper_.joinable()) keeper_.join();
  if (lease == 0) return;
  try {
    client_->lease_revoke(lease);
  } catch (const Error& e) {
    DTRAIN_DEBUG(rdzv, "etcd {}: revoking lease {}: {}", endpoint(), Keys::lease_text(lease), e.what());
  }
}

// Renews the lease every heartbeat interval. While the node is monitored a failed renewal is the
// rendezvous lost; during a join the join's own requests meet the same trouble.
void EtcdSession::keeper_loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait_for(lock, opts_.heartbeat_interval, [&] { return keeper_stop_; });
    if (keeper_stop_) return;
    std::int64_t lease = lease_;
    lock.unlock();
    std::string failed;
    try {
      client_->lease_keepalive(lease);
    } catch (const Error& e) {
      failed = e.what();
    }
    lock.lock();
    if (keeper_stop_) return;
    if (!failed.empty() && monitoring_) {
      lock.unlock();
      lost_rendezvous(fmt::format("renewing this node's lease failed: {}", failed));
      return;
    }
  }
}

void EtcdSession::start_monitoring(rdzv::EventFn on_event) {
  stop_monitoring();
  std::int64_t g, from;
  {
    std::lock_guard lock(mu_);
    g = result_.generation;
    from = table_revision_ + 1;
  }
  auto w = std::make_shared<Watch>(*client_, keys_.generation(g), prefix_end(keys_.generation(g)), from);
  std::lock_guard lock(mu_);
  on_event_ = std::move(on_event);
  watch_ = w;
  monitoring_ = true;
  watcher_ = std::thread([this, w] { watch_loop(w); });
}

void EtcdSession::stop_monitoring() {
  std::shared_ptr<Watch> w;
  {
    std::lock_guard lock(mu_);
    monitoring_ = false;
    w = std::move(watch_);
  }
  if (w) w->close();
  if (watcher_.joinable()) watcher_.join();
}

void EtcdSession::watch_loop(std::shared_ptr<Watch> w) {
  for (;;) {
    try {
      auto evs = w->next(kWatchSlice);
      {
        std::lock_guard lock(mu_);
        if (!monitoring_) return;
      }
      on_watch_events(evs);
    } catch (const std::exception& e) {
      {
        std::lock_guard lock(mu_);
        if (!monitoring_) return;
      }
      lost_rendezvous(fmt::format("the watch of the job's keys broke: {}", e.what()));
      return;
    }
  }
}

// Job events, done keys and lost nodes (a table node's key gone without its done key) of the generation.
void EtcdSession::on_watch_events(const std::vector<WatchEvent>& evs) {
  std::int64_t g;
  {
    std::lock_guard lock(mu_);
    g = result_.generation;
  }
  for (const auto& ev : evs) {
    const std::string& key = ev.kv.key;
    if (ev.type == WatchEvent::Type::put && key.rfind(keys_.events(g), 0) == 0) {
      emit(decode_event(ev.kv.value, ev.kv.mod_revision));
    } else if (ev.type == WatchEvent::Type::put && key.rfind(keys_.done(g), 0) == 0) {
      std::lock_guard lock(mu_);
      done_.insert(std::atoi(last_part(key).c_str()));
      cv_.notify_all();
    } else if (ev.type == WatchEvent::Type::erase && key.rfind(keys_.nodes(g), 0) == 0) {
      Event lost;
      {
        std::lock_guard lock(mu_);
        const Table::Row* row = table_.find(last_part(key));
        if (row == nullptr || done_.count(row->entry.node_rank) != 0) continue;
        lost.node = row->entry.node_rank;
        lost.host = row->entry.host;
      }
      lost.kind = "lost";
      lost.seq = ev.kv.mod_revision;
      lost.generation = g;
      lost.message = fmt::format("its lease in etcd ended: the agent stopped renewing it for {:g} s (killed, hung or "
                                 "cut off)", double(opts_.heartbeat_timeout.count()) / 1000.0);
      emit(lost);
    }
  }
}

void EtcdSession::lost_rendezvous(const std::string& why) { emit(rdzv::rendezvous_lost("etcd " + endpoint(), why)); }

void EtcdSession::emit(const Event& e) {
  std::lock_guard serial(emit_mu_);
  rdzv::EventFn fn;
  {
    std::lock_guard lock(mu_);
    if (e.seq > 0) {
      if (e.seq <= last_seq_) return;
      last_seq_ = e.seq;
    } else {
      if (lost_emitted_) return;
      lost_emitted_ = true;
    }
    if (!root_ && fatal(e)) root_ = e;
    cv_.notify_all();
    fn = on_event_;
  }
  if (!fn) return;
  try {
    fn(e);
  } catch (const std::exception& ex) {
    DTRAIN_WARN(rdzv, "job event callback threw: {}", ex.what());
  }
}

void EtcdSession::post_event(Event e) {
  std::string key;
  {
    std::lock_guard lock(mu_);
    DTRAIN_CHECK(lease_ != 0, "report before join");
    e.node = result_.self.node_rank;
    e.generation = result_.generation;
    key = keys_.events(result_.generation) + Keys::lease_text(lease_) + "-" + std::to_string(++event_count_);
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

rdzv::JoinResult EtcdSession::join(const rdzv::ProgressFn& progress) {
  stop_monitoring();
  end_lease();  // a second join replaces the first membership
  rdzv::JoinResult r = run_join(opts_.store.generation, progress);
  opts_.store.generation = r.generation;
  {
    std::lock_guard lock(mu_);
    result_ = r;
    root_.reset();
    last_seq_ = 0;
    done_.clear();
    lost_emitted_ = false;
  }
  DTRAIN_INFO(rdzv, "joined run '{}' generation {} through etcd {} as node {} of {} (world size {}, master {}:{})",
              opts_.store.run_id, r.generation, endpoint(), r.self.node_rank, r.self.nnodes, r.self.world_size,
              r.self.master_addr, r.self.master_port);
  return r;
}

rdzv::JoinResult EtcdSession::rejoin(int generation, const rdzv::ProgressFn& progress) {
  rdzv::prepare_rejoin(opts_, result_, generation);
  return join(progress);
}

void EtcdSession::cancel_join() {
  std::lock_guard lock(mu_);
  join_cancelled_ = true;
  if (joining_watch_) joining_watch_->close();
  cv_.notify_all();
}

std::optional<Event> EtcdSession::finish(milliseconds timeout) {
  std::int64_t g;
  int rank;
  std::optional<Event> cause;
  std::vector<std::string> missing;
  {
    std::lock_guard lock(mu_);
    DTRAIN_CHECK(lease_ != 0, "finish before join");
    g = result_.generation;
    rank = result_.self.node_rank;
    cause = root_;  // a failure or loss of this generation already happened: no barrier to wait for
  }
  if (!cause) {
    try {
      client_->put(keys_.done(g) + std::to_string(rank), "1");
    } catch (const Error& e) {
      stop_monitoring();
      throw rdzv::NodeLostError(-1, "etcd " + endpoint(), fmt::format("lost etcd at {} in the exit barrier: {}", endpoint(), e.what()));
    }
    std::unique_lock lock(mu_);
    done_.insert(rank);
    auto all_done = [&] {
      for (const auto& r : table_.rows)
        if (done_.count(r.entry.node_rank) == 0) return false;
      return true;
    };
    cv_.wait_for(lock, timeout, [&] { return root_.has_value() || all_done(); });
    cause = root_;
    if (!cause && !all_done())
      for (const auto& r : table_.rows)
        if (done_.count(r.entry.node_rank) == 0) missing.push_back(fmt::format("node {} ({})", r.entry.node_rank, r.entry.host));
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
    end_lease();
  }
  return cause;
}

std::optional<Event> EtcdSession::root_cause() const {
  std::lock_guard lock(mu_);
  return root_;
}

rdzv::JoinResult EtcdSession::result() const {
  std::lock_guard lock(mu_);
  return result_;
}

}  // namespace dtrain::etcd
