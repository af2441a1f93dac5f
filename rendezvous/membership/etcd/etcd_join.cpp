// EtcdSession's join barrier (etcd_session.hpp): one join, following an elastic job to the
// generation that gathers its nodes. Every joiner runs the built-in rendezvous's pure barrier
// (membership/join_barrier.hpp) over the join requests it sees in etcd, in revision order, so that all
// of them refuse the same nodes and close with the same table; etcd's transaction lets only the
// first table stand.
#include <thread>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/log.hpp"
#include "dtrain/common/net.hpp"
#include "etcd_session.hpp"
#include "dtrain/rendezvous/store/refused.hpp"

namespace dtrain::etcd {

using Clock = std::chrono::steady_clock;
using rdzv::JoinError;
using rdzv::JoinRequest;
using rdzv::Refused;
using std::chrono::milliseconds;
using rdzv::wire::ErrorCode;

namespace {

constexpr milliseconds kProgressEvery{1000};
constexpr milliseconds kRetryEvery{1000};
constexpr int kMaxHops = 8;

}  // namespace

// One join: attempts generation after generation (an elastic job moves on) until a table holds us.
class JoinRun {
 public:
  JoinRun(EtcdSession& s, const rdzv::ProgressFn& progress)
      : s_(s), progress_(progress), start_(Clock::now()), deadline_(start_ + s.opts_.join_timeout) {}

  rdzv::JoinResult run(std::int64_t generation);

 private:
  using Written = std::optional<std::pair<std::string, std::int64_t>>;  // a table's text and revision

  std::optional<rdzv::JoinResult> attempt(std::int64_t g);
  JoinRequest request() const;
  std::shared_ptr<Watch> enter(std::int64_t g, Written& written);
  std::optional<rdzv::JoinResult> wait(std::int64_t g, Watch& watch, Written& written);
  void leave();
  std::int64_t move_on(std::int64_t g, const Table& t);
  void add_member(const std::string& id, const JoinRequest& r);
  void remove_member(const std::string& id);
  Table close_barrier(std::int64_t g, std::int64_t& revision);
  rdzv::JoinResult result_for(std::int64_t g, const Table& t, const Table::Row& row, std::int64_t revision);
  void report(bool reachable, const std::string& why);
  void check_cancelled();
  [[noreturn]] void refuse(ErrorCode code, const std::string& what);

  EtcdSession& s_;
  const rdzv::ProgressFn& progress_;
  Clock::time_point start_, deadline_, last_progress_{};
  JoinRequest me_;
  std::string my_id_, local_;
  std::int64_t g_ = 0;
  std::unique_ptr<rdzv::JoinBarrier> barrier_;
  std::vector<std::pair<const rdzv::Node*, std::string>> members_;  // join order
  std::vector<std::pair<std::string, JoinRequest>> requests_;        // join order, refused ones too
};

void JoinRun::report(bool reachable, const std::string& why) {
  if (!progress_) return;
  auto now = Clock::now();
  if (now - last_progress_ < kProgressEvery) return;
  last_progress_ = now;
  rdzv::JoinProgress p;
  p.reachable = reachable;
  p.endpoint = "etcd at " + s_.endpoint();
  p.why = why;
  p.joined = barrier_ ? barrier_->joined() : 0;
  p.instances = barrier_ && barrier_->joined() > 0 ? barrier_->instances() : s_.opts_.instances;
  p.missing = barrier_ && barrier_->joined() > 0 ? barrier_->missing_short() : std::string("every node");
  p.elapsed = std::chrono::duration_cast<milliseconds>(now - start_);
  p.timeout = s_.opts_.join_timeout;
  progress_(p);
}

void JoinRun::check_cancelled() {
  std::lock_guard lock(s_.mu_);
  if (s_.join_cancelled_) throw rdzv::Cancelled(fmt::format("joining the rendezvous at etcd {}: cancelled", s_.endpoint()));
}

// Takes our request out of generation g_'s barrier, where it would otherwise count.
void JoinRun::leave() {
  try {
    if (s_.lease_ != 0) s_.client_->erase(s_.keys_.node(g_, s_.lease_));
  } catch (const Error&) {
    // the lease's end removes it too
  }
}

void JoinRun::refuse(ErrorCode code, const std::string& what) {
  leave();
  throw JoinError(code, what);
}

rdzv::JoinResult JoinRun::run(std::int64_t generation) {
  std::string why;
  for (int hop = 0;;) {
    check_cancelled();
    try {
      if (local_.empty()) {
        generation = s_.target_generation(generation);
        s_.start_lease();
        local_ = s_.client_->local_address();
        my_id_ = Keys::lease_text(s_.lease_);
      }
      if (auto r = attempt(generation)) return *r;
      generation = g_;  // moved on
      if (++hop > kMaxHops) throw IoError(fmt::format("etcd {}: the job kept moving to later generations", s_.endpoint()));
      continue;
    } catch (const rdzv::Cancelled&) {
      throw;
    } catch (const TimeoutError&) {
      if (Clock::now() >= deadline_) throw;
      why = "a request timed out";
    } catch (const IoError& e) {
      why = e.what();
    }
    check_cancelled();
    if (Clock::now() >= deadline_)
      throw IoError(fmt::format("etcd at {} not reachable for the join timeout ({} s): {}", s_.endpoint(),
                                s_.opts_.join_timeout.count() / 1000, why));
    report(false, why);
    std::unique_lock lock(s_.mu_);
    s_.cv_.wait_for(lock, kRetryEvery, [&] { return s_.join_cancelled_; });
  }
}

void JoinRun::add_member(const std::string& id, const JoinRequest& r) {
  for (const auto& [other, req] : requests_)
    if (other == id) return;  // seen in the first range and again in the watch
  requests_.emplace_back(id, r);
  try {
    members_.emplace_back(&barrier_->add(r, r.addr), id);
  } catch (const Refused& e) {
    // a node of another job stops every joiner (as the built-in rendezvous refuses them all); any
    // other refusal is that node's own
    if (e.code == ErrorCode::spec_mismatch || id == my_id_) refuse(e.code, e.what());
    DTRAIN_DEBUG(rdzv, "etcd join: host {} is refused: {}", r.host, e.what());
  }
}

void JoinRun::remove_member(const std::string& id) {
  for (auto it = members_.begin(); it != members_.end(); ++it)
    if (it->second == id) {
      barrier_->remove(*it->first);
      members_.erase(it);
      break;
    }
  std::erase_if(requests_, [&](const auto& r) { return r.first == id; });
}

// Our barrier is ready: close it and write the table, unless another node wrote one first.
Table JoinRun::close_barrier(std::int64_t g, std::int64_t& revision) {
  const Keys& k = s_.keys_;
  barrier_->close(Clock::now());
  std::string text = encode_table(*barrier_, members_, requests_.front().second);
  std::vector<Op> write{Op::put(k.table(g), text)};
  if (g > 0) write.push_back(Op::erase(k.generation(g - 1), prefix_end(k.generation(g - 1))));  // the old generation's keys
  TxnResult r = s_.client_->txn({{k.table(g), Compare::Target::create, Compare::Result::equal, 0, {}}}, write,
                                {Op::range(k.table(g))});
  if (r.succeeded) {
    revision = r.revision;
    return decode_table(text);
  }
  const auto& kv = r.ranges.at(0).kvs.at(0);
  revision = kv.mod_revision;
  return decode_table(kv.value);
}

rdzv::JoinResult JoinRun::result_for(std::int64_t g, const Table& t, const Table::Row& row, std::int64_t revision) {
  rdzv::JoinResult r;
  r.self = t.reply_for(row);
  r.table = t.entries();
  r.generation = int(g);
  r.local_address = local_;
  std::lock_guard lock(s_.mu_);
  s_.table_ = t;
  s_.table_revision_ = revision;
  return r;
}

rdzv::JoinRequest JoinRun::request() const {
  const auto& o = s_.opts_;
  JoinRequest r;
  r.host = o.host;
  r.requested = o.node_rank;
  r.slots = o.slots;
  r.instances = o.instances;
  r.spec_hash = o.spec_hash;
  r.addr = o.advertise_addr.empty() ? local_ : o.advertise_addr;
  r.master_port = o.master_port > 0 ? o.master_port : net::pick_free_port(r.addr);
  r.heartbeat_timeout_ms = o.heartbeat_timeout.count();
  r.min_instances = o.min_instances;
  r.last_call_ms = o.last_call.count();
  return r;
}

// Reads generation g's requests (and a table written since we looked) at one revision, puts ours,
// and watches from that revision: our own request comes back through the watch, in etcd's order, so
// every request that was there before ours is seen before it, even one taken back at once (a node
// that our request makes refuse the job).
std::shared_ptr<Watch> JoinRun::enter(std::int64_t g, Written& written) {
  const Keys& k = s_.keys_;
  auto& client = *s_.client_;
  TxnResult both = client.txn({}, {Op::range(k.nodes(g), prefix_end(k.nodes(g))), Op::range(k.table(g))});
  if (const auto& tk = both.ranges.at(1).kvs; !tk.empty()) written.emplace(tk[0].value, tk[0].mod_revision);
  auto watch = std::make_shared<Watch>(client, k.generation(g), prefix_end(k.generation(g)), both.revision + 1);
  barrier_ = std::make_unique<rdzv::JoinBarrier>();
  members_.clear();
  requests_.clear();
  auto& kvs = both.ranges.at(0).kvs;
  std::sort(kvs.begin(), kvs.end(), [](const auto& a, const auto& b) { return a.create_revision < b.create_revision; });
  for (const auto& kv : kvs) add_member(last_part(kv.key), decode_request(kv.value));
  client.put(k.node(g, s_.lease_), encode_request(me_), s_.lease_);
  return watch;
}

std::optional<rdzv::JoinResult> JoinRun::attempt(std::int64_t g) {
  g_ = g;
  me_ = request();
  if (auto t = s_.client_->range(s_.keys_.table(g)); !t.kvs.empty()) {
    g_ = move_on(g, decode_table(t.kvs[0].value));
    return std::nullopt;
  }
  Written written;
  auto watch = enter(g, written);
  {
    std::lock_guard lock(s_.mu_);
    s_.joining_watch_ = watch;  // cancel_join() closes it
  }
  struct Unregister {
    EtcdSession& s;
    ~Unregister() {
      std::lock_guard lock(s.mu_);
      s.joining_watch_.reset();
    }
  } unregister{s_};
  return wait(g, *watch, written);
}

// Until a table closes generation g (ours, or the one another node wrote first), or the deadline.
std::optional<rdzv::JoinResult> JoinRun::wait(std::int64_t g, Watch& watch, Written& written) {
  const Keys& k = s_.keys_;
  for (;;) {
    check_cancelled();
    Table t;
    std::int64_t revision = 0;
    if (written) {
      t = decode_table(written->first);
      revision = written->second;
    } else if (barrier_->ready(Clock::now())) {
      t = close_barrier(g, revision);
    }
    if (!t.rows.empty()) {
      if (const Table::Row* row = t.find(my_id_)) return result_for(g, t, *row, revision);
      leave();  // closed without us
      g_ = move_on(g, t);
      return std::nullopt;
    }
    auto now = Clock::now();
    if (now >= deadline_) {
      std::string text = barrier_->missing_text();
      leave();
      throw TimeoutError(fmt::format("join timed out after {:g} s: {} of {} nodes joined; {}",
                                     double(s_.opts_.join_timeout.count()) / 1000.0, barrier_->joined(),
                                     barrier_->instances(), text));
    }
    report(true, {});
    auto left = std::chrono::duration_cast<milliseconds>(deadline_ - now) + milliseconds(1);
    for (const auto& ev : watch.next(std::min<milliseconds>(kProgressEvery, left))) {
      const std::string& key = ev.kv.key;
      if (key == k.table(g) && ev.type == WatchEvent::Type::put) written.emplace(ev.kv.value, ev.kv.mod_revision);
      if (key.rfind(k.nodes(g), 0) != 0) continue;
      if (ev.type == WatchEvent::Type::put) add_member(last_part(key), decode_request(ev.kv.value));
      else remove_member(last_part(key));
    }
  }
}

// Generation g runs with table t, without us: the generation to join instead, or a refusal.
std::int64_t JoinRun::move_on(std::int64_t g, const Table& t) {
  const Keys& k = s_.keys_;
  rdzv::JoinBarrier job;
  job.add(t.job, t.job.addr);
  try {
    job.check_same_job(me_);
  } catch (const Refused& e) {
    throw JoinError(e.code, e.what());
  }
  std::vector<std::string> hosts;
  for (const auto& r : t.rows) hosts.push_back(r.entry.host);
  if (!me_.elastic())
    throw JoinError(ErrorCode::too_many_nodes,
                    fmt::format("too many nodes: run '{}' generation {} runs with its {} nodes ({}); host {} is one too many",
                                s_.opts_.store.run_id, g, t.rows.size(), rdzv::list_text(hosts), me_.host));
  TxnResult now = s_.client_->txn({}, {Op::range(k.events(g), prefix_end(k.events(g))),
                                       Op::range(k.done(g), prefix_end(k.done(g))),
                                       Op::range(k.nodes(g), prefix_end(k.nodes(g)))});
  if (!now.ranges.at(1).kvs.empty())
    throw JoinError(ErrorCode::too_many_nodes, fmt::format("host {} cannot join run '{}': its nodes are finishing",
                                                           me_.host, s_.opts_.store.run_id));
  bool ending = false;
  for (const auto& kv : now.ranges.at(0).kvs) ending |= decode_event(kv.value, kv.mod_revision).kind != "joined";
  int alive = 0;
  for (const auto& kv : now.ranges.at(2).kvs) alive += t.find(last_part(kv.key)) != nullptr ? 1 : 0;
  ending |= alive < int(t.rows.size());  // a node was lost: the generation ends anyway
  if (!ending) {
    if (alive >= me_.instances)
      throw JoinError(ErrorCode::too_many_nodes,
                      fmt::format("too many nodes: the elastic job runs with its maximum of {} nodes; host {} is one too many",
                                  me_.instances, me_.host));
    rdzv::Event e;
    e.kind = "joined";
    e.host = me_.host;
    e.generation = g;
    e.message = fmt::format("host {} joins: the job moves to generation {} with {} nodes", me_.host, g + 1, alive + 1);
    s_.client_->put(k.events(g) + my_id_ + "-joined", encode_event(e));
    DTRAIN_INFO(rdzv, "etcd {}: run '{}' generation {}: {}", s_.endpoint(), s_.opts_.store.run_id, g, e.message);
  }
  s_.raise_generation(g + 1);
  return g + 1;
}

rdzv::JoinResult EtcdSession::run_join(std::int64_t generation, const rdzv::ProgressFn& progress) {
  JoinRun run(*this, progress);
  return run.run(generation);
}

}  // namespace dtrain::etcd
