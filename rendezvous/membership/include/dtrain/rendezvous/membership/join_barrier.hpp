#pragma once
// The node join barrier of one scope, pure (no sockets): checks each JOIN against the first one in
// O(1), holds the nodes until `instances` are in, then assigns node ranks and global rank offsets
// in O(n) and encodes the rank table once. An elastic job (min_instances < instances) closes with
// `instances` nodes at once, or with min or more once last_call has passed since the min-th joined;
// its node ranks are dense 0..n-1, a node's requested rank only a preference (requested ranks
// first, in rank order, then the others in join order). Refusals throw Refused with the code the joiner gets
// (spec_mismatch, duplicate_rank, too_many_nodes, bad_request); a spec mismatch names the fields
// that differ (spec_digest.hpp), and join_ops refuses every waiting node with it too.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dtrain/rendezvous/membership/records.hpp"
#include "dtrain/rendezvous/store/wire.hpp"

namespace dtrain::rdzv {

using Clock = std::chrono::steady_clock;

// One agent of the job, from its JOIN until the scope is freed.
struct Node {
  int requested = -1;  // node rank asked for, -1: any
  int rank = -1;       // assigned when the join barrier closes
  std::string host, addr, state = "joining";
  int slots = 0, master_port = 0, offset = 0;
  std::int64_t running = 0, exited = 0, restarts = 0;  // from heartbeats, for STATUS
  Clock::time_point last_seen = Clock::now();
  bool lost = false, left = false;
};

// The arguments of JOIN, in wire order.
struct JoinRequest {
  std::string host;
  std::int64_t requested = -1, slots = 0, instances = 0;
  std::string spec_hash;
  std::int64_t master_port = 0;
  std::string addr;  // advertised address, empty: as the server sees the peer
  std::int64_t heartbeat_timeout_ms = 0, timeout_ms = 0;
  // optional (older agents send neither): elastic min node count (0: instances) and last call
  std::int64_t min_instances = 0, last_call_ms = 0;

  bool elastic() const { return min_instances > 0 && min_instances < instances; }

  static JoinRequest parse(const wire::Frame& f);  // throws wire::ProtocolError
};

class JoinBarrier {
 public:
  // Admits a node; `seen_addr` is its address as the server sees it (used when it advertises none).
  Node& add(const JoinRequest& r, const std::string& seen_addr);
  // Refuses (spec_mismatch) a node of another job: its node range or spec hash differs from the first's.
  // add() checks it too; an elastic job checks a node for its next generation here first.
  void check_same_job(const JoinRequest& r) const;
  // Removes a node that left before the barrier closed (timed out or disconnected). The first join
  // of an empty barrier sets the job shape again.
  void remove(const Node& n);
  bool full() const { return !closed_ && int(nodes_.size()) == instances_; }
  // Full, or (elastic) min joined and the last call is over at `now`.
  bool ready(Clock::time_point now) const;
  // Places the nodes (explicit ranks, then the others in join order), computes offsets, MASTER_ADDR
  // and MASTER_PORT from node 0, and encodes the rank table. Every node becomes "joined", seen at now.
  void close(Clock::time_point now);
  JoinReply reply_for(const Node& n) const;

  // "node 2, node 3" or, when some nodes joined without a fixed rank, "1 more node(s) (ranks not taken: 2)".
  std::string missing_short(std::size_t cap = 8) const;
  // "missing: node 2 (joined: node 0 on n0, node 1 on n1)"
  std::string missing_text() const;

  bool closed() const { return closed_; }
  bool elastic() const { return min_ < instances_; }
  // Nodes expected: before the close the max, after it the nodes that are in the job.
  int instances() const { return instances_; }
  int max_instances() const { return max_; }
  int joined() const { return int(nodes_.size()); }
  int world_size() const { return world_size_; }
  const std::string& master_addr() const { return master_addr_; }
  int master_port() const { return master_port_; }
  std::chrono::milliseconds heartbeat_timeout() const { return hb_timeout_; }
  const std::vector<std::unique_ptr<Node>>& nodes() const { return nodes_; }  // join order
  // The encoded TABLE reply (or an ERROR limit frame when the table is over the frame limit); set by close().
  const std::shared_ptr<const Bytes>& table_frame() const { return table_frame_; }

 private:
  void check_rank_free(const JoinRequest& r) const;

  void place_elastic();

  int instances_ = 0;
  int max_ = 0, min_ = 0;
  std::chrono::milliseconds last_call_{0};
  std::optional<Clock::time_point> last_call_at_;  // elastic: when the barrier may close with min or more
  std::string spec_hash_;
  std::chrono::milliseconds hb_timeout_{0};
  std::vector<std::unique_ptr<Node>> nodes_;  // join order
  std::vector<Node*> by_rank_;                // size instances once the first node joined
  bool closed_ = false;
  std::shared_ptr<const Bytes> table_frame_;
  int world_size_ = 0;
  std::string master_addr_;
  int master_port_ = 0;
};

// "4", or "2-4 (elastic)".
std::string range_text(std::int64_t min, std::int64_t max);
// "a, b, c" of the first `cap` items, then ", ... (N more)".
std::string list_text(const std::vector<std::string>& items, std::size_t cap = 16);

}  // namespace dtrain::rdzv
