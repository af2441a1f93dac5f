#include "dtrain/rendezvous/membership/join_barrier.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>

#include "dtrain/rendezvous/store/refused.hpp"
#include "spec_digest.hpp"

namespace dtrain::rdzv {

using wire::ErrorCode;
using wire::Frame;
using wire::Op;

constexpr std::int64_t kMaxLastCallMs = 31'536'000'000;  // a year, as rendezvous.last_call_s allows

std::string range_text(std::int64_t min, std::int64_t max) {
  return min == max ? std::to_string(max) : fmt::format("{}-{} (elastic)", min, max);
}

std::string list_text(const std::vector<std::string>& items, std::size_t cap) {
  std::string out;
  for (std::size_t i = 0; i < items.size() && i < cap; ++i) out += (i ? ", " : "") + items[i];
  if (items.size() > cap) out += fmt::format(", ... ({} more)", items.size() - cap);
  return out;
}

JoinRequest JoinRequest::parse(const Frame& f) {
  JoinRequest r;
  r.host = std::string(f.str_at(0).substr(0, 256));
  r.requested = f.i64_at(1);
  r.slots = f.i64_at(2);
  r.instances = f.i64_at(3);
  r.spec_hash = std::string(f.str_at(4).substr(0, 4096));
  r.master_port = f.i64_at(5);
  r.addr = std::string(f.str_at(6).substr(0, 256));
  r.heartbeat_timeout_ms = f.i64_at(7);
  r.timeout_ms = f.i64_at(8);
  if (f.args.size() > 10) {
    r.min_instances = f.i64_at(9);
    r.last_call_ms = f.i64_at(10);
  }
  return r;
}

Node& JoinBarrier::add(const JoinRequest& r, const std::string& seen_addr) {
  if (r.instances < 1 || r.instances > 65536)
    throw Refused(ErrorCode::bad_request, fmt::format("instances {} out of range 1-65536", r.instances));
  if (r.slots < 0 || r.slots > 100000)
    throw Refused(ErrorCode::bad_request, fmt::format("slot count {} out of range", r.slots));
  // -1 is "any rank"; below it, the rank would not survive the narrowing to Node::requested
  if (r.requested < -1)
    throw Refused(ErrorCode::bad_request, fmt::format("node rank {} out of range (-1 for any)", r.requested));
  if (r.elastic() && (r.min_instances < 1 || r.last_call_ms < 0 || r.last_call_ms > kMaxLastCallMs))
    throw Refused(ErrorCode::bad_request, fmt::format("elastic range {}-{} or last call {} ms out of range",
                                                      r.min_instances, r.instances, r.last_call_ms));
  if (r.requested >= r.instances && !r.elastic())
    throw Refused(ErrorCode::too_many_nodes,
                  fmt::format("host {} asks for node rank {} but the job has {} nodes (ranks 0-{})", r.host,
                              r.requested, r.instances, r.instances - 1));
  if (closed_) {
    std::vector<std::string> hosts;
    for (auto& n : nodes_) hosts.push_back(n->host);
    throw Refused(ErrorCode::too_many_nodes,
                  fmt::format("too many nodes: the job expects {} nodes and all have joined ({}); host {} "
                              "is one too many",
                              instances_, list_text(hosts), r.host));
  }
  if (nodes_.empty()) {
    instances_ = max_ = int(r.instances);
    min_ = r.elastic() ? int(r.min_instances) : max_;
    last_call_ = std::chrono::milliseconds(r.last_call_ms);
    spec_hash_ = r.spec_hash;
    hb_timeout_ = std::chrono::milliseconds(r.heartbeat_timeout_ms);
    by_rank_.assign(std::size_t(r.instances), nullptr);
  } else {
    check_same_job(r);
  }
  check_rank_free(r);
  auto n = std::make_unique<Node>();
  n->requested = r.requested < max_ ? int(r.requested) : -1;
  n->host = r.host;
  n->addr = r.addr.empty() ? seen_addr : r.addr;
  n->slots = int(r.slots);
  n->master_port = int(r.master_port);
  if (r.requested >= 0 && !elastic()) by_rank_[std::size_t(r.requested)] = n.get();
  nodes_.push_back(std::move(n));
  if (elastic() && int(nodes_.size()) == min_) last_call_at_ = Clock::now() + last_call_;
  return *nodes_.back();
}

bool JoinBarrier::ready(Clock::time_point now) const {
  if (closed_ || nodes_.empty()) return false;
  return full() || (last_call_at_ && int(nodes_.size()) >= min_ && now >= *last_call_at_);
}

void JoinBarrier::check_same_job(const JoinRequest& r) const {
  const Node& first = *nodes_.front();
  if (r.instances != max_ || (r.elastic() ? int(r.min_instances) : int(r.instances)) != min_)
    throw Refused(ErrorCode::spec_mismatch,
                  fmt::format("spec mismatch: host {} expects {} nodes but host {} joined expecting {}; "
                              "every node must run the same job spec",
                              r.host, range_text(r.elastic() ? r.min_instances : r.instances, r.instances), first.host,
                              range_text(min_, max_)));
  if (r.spec_hash != spec_hash_) {
    auto who = [](const std::string& host, std::int64_t rank) {
      return rank >= 0 ? fmt::format("node {} ({})", rank, host) : fmt::format("host {}", host);
    };
    throw Refused(ErrorCode::spec_mismatch,
                  fmt::format("spec mismatch between {} and {}: {}; every node must run the same job (command, "
                              "cluster shape, batch, parallel layout)",
                              who(first.host, first.requested), who(r.host, r.requested),
                              spec_difference(spec_hash_, who(first.host, first.requested), r.spec_hash,
                                              who(r.host, r.requested))));
  }
}

void JoinBarrier::check_rank_free(const JoinRequest& r) const {
  if (r.requested >= 0 && !elastic() && by_rank_[std::size_t(r.requested)] != nullptr)
    throw Refused(ErrorCode::duplicate_rank,
                  fmt::format("duplicate node rank {}: host {} already joined as node {}, and host {} asks "
                              "for it too; give each node its own node rank",
                              r.requested, by_rank_[std::size_t(r.requested)]->host, r.requested, r.host));
  if (int(nodes_.size()) >= instances_)
    throw Refused(ErrorCode::too_many_nodes,
                  fmt::format("too many nodes: the job expects {} and {} have joined; host {} is one too many",
                              instances_, nodes_.size(), r.host));
}

void JoinBarrier::remove(const Node& n) {
  if (n.requested >= 0 && n.requested < int(by_rank_.size()) && by_rank_[std::size_t(n.requested)] == &n)
    by_rank_[std::size_t(n.requested)] = nullptr;
  nodes_.erase(std::remove_if(nodes_.begin(), nodes_.end(), [&n](auto& p) { return p.get() == &n; }), nodes_.end());
  if (int(nodes_.size()) < min_) last_call_at_.reset();
  if (nodes_.empty() && !closed_) {
    instances_ = max_ = min_ = 0;
    spec_hash_.clear();
    by_rank_.clear();
  }
}

// Elastic: dense ranks over the nodes that joined, requested ranks first (in rank order).
void JoinBarrier::place_elastic() {
  std::vector<Node*> order;
  for (auto& n : nodes_) order.push_back(n.get());
  std::stable_sort(order.begin(), order.end(), [](const Node* a, const Node* b) {
    return (a->requested < 0 ? INT_MAX : a->requested) < (b->requested < 0 ? INT_MAX : b->requested);
  });
  instances_ = int(order.size());
  by_rank_ = std::move(order);
}

void JoinBarrier::close(Clock::time_point now) {
  if (elastic()) {
    place_elastic();
  } else {
    std::size_t cursor = 0;  // explicit ranks are in by_rank_; the others fill the free ranks in join order
    for (auto& n : nodes_) {
      if (n->requested >= 0) continue;
      while (by_rank_[cursor] != nullptr) ++cursor;
      by_rank_[cursor] = n.get();
    }
  }
  int offset = 0;
  Frame table(Op::value);
  for (int r = 0; r < instances_; ++r) {
    Node* n = by_rank_[std::size_t(r)];
    n->rank = r;
    n->offset = offset;
    offset += n->slots;
    n->state = "joined";
    n->last_seen = now;
    table.args.push_back(pack_node_entry(NodeEntry{r, n->host, n->addr, n->slots, n->offset}));
  }
  world_size_ = offset;
  master_addr_ = by_rank_[0]->addr;
  master_port_ = by_rank_[0]->master_port;
  closed_ = true;
  try {
    table_frame_ = std::make_shared<const Bytes>(wire::encode(table));
  } catch (const wire::ProtocolError& e) {  // the rank table alone is over the frame limit
    table_frame_ = std::make_shared<const Bytes>(wire::encode(Frame(Op::error).i64(std::int64_t(ErrorCode::limit)).str(
        fmt::format("rank table of {} nodes: {}", instances_, e.what()))));
  }
}

JoinReply JoinBarrier::reply_for(const Node& n) const {
  return JoinReply{n.rank, instances_, world_size_, n.offset, n.slots, master_addr_, master_port_};
}

std::string JoinBarrier::missing_short(std::size_t cap) const {
  if (elastic()) {
    int joined = int(nodes_.size());
    if (joined < min_) return fmt::format("at least {} more node(s) of an elastic {}-{}", min_ - joined, min_, max_);
    auto left = last_call_at_ ? std::chrono::ceil<std::chrono::seconds>(*last_call_at_ - Clock::now()).count() : 0;
    return fmt::format("up to {} more node(s) of an elastic {}-{}; last call, closing in {} s", max_ - joined, min_, max_,
                       std::max<long long>(left, 0));
  }
  std::vector<std::string> missing;
  int autos = 0;
  for (const auto& n : nodes_)
    if (n->requested < 0) ++autos;
  for (int r = 0; r < int(by_rank_.size()); ++r)
    if (by_rank_[std::size_t(r)] == nullptr) missing.push_back(fmt::format("node {}", r));
  if (autos == 0) return list_text(missing, cap);
  return fmt::format("{} more node(s) (ranks not taken: {})", instances_ - int(nodes_.size()), list_text(missing, cap));
}

std::string JoinBarrier::missing_text() const {
  std::vector<std::string> joined;
  for (const auto& n : nodes_)
    joined.push_back(n->requested >= 0 ? fmt::format("node {} on {}", n->requested, n->host) : n->host);
  return fmt::format("missing: {} (joined: {})", missing_short(32),
                     joined.empty() ? std::string("none") : list_text(joined, 32));
}

}  // namespace dtrain::rdzv
