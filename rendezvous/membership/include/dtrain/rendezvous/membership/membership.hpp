#pragma once
// Membership: one agent's part in a multi-node job (join barrier, heartbeats, job events, exit
// barrier), whatever holds the records. Two backends:
//   NodeSession (node_session.hpp)  the built-in rendezvous: a dtrain store served by node 0's agent
//                                   or by `dtrain rendezvous serve`
//   the etcd backend (etcd_membership.hpp) an etcd v3 cluster that no training node holds, so any node,
//                                   node 0 included, may be lost and the others go on
// Both follow the contract below, which is NodeSession's (see node_session.hpp for the life cycle,
// the threading rules and the errors each call throws); the agent (agent/src/control_thread.hpp)
// drives either through this interface.
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dtrain/rendezvous/store/client.hpp"
#include "dtrain/rendezvous/membership/records.hpp"
#include "dtrain/rendezvous/membership/stacks_desk.hpp"

namespace dtrain::rdzv {

struct NodeSessionOptions {
  ClientOptions store;            // endpoint, token, run id, generation of the first join
  std::string host;               // this node's host name (shown in tables and errors)
  int node_rank = -1;             // from discovery; -1: the server assigns one
  int slots = 1;                  // local workers
  int instances = 1;              // nodes the job expects (an elastic job: at most)
  int min_instances = 0;          // elastic: at least (0: exactly `instances`); node ranks are then
                                  // assigned densely by the rendezvous and node_rank is a preference
  std::chrono::milliseconds last_call{30000};  // elastic: the barrier closes this long after min joined
  std::string spec_hash;          // every node must present the same (command, cluster, ...)
  int master_port = 0;            // MASTER_PORT proposed if this node becomes node 0; 0: a free port
  std::string advertise_addr;     // MASTER_ADDR if node 0; empty: our address on the store connection
  std::chrono::milliseconds join_timeout{600000};
  std::chrono::milliseconds heartbeat_interval{5000};
  std::chrono::milliseconds heartbeat_timeout{15000};  // 0: never declare a node lost for silence
  bool fetch_table = true;        // also fetch the full rank table after the barrier (N rows per
                                  // node: turn off for thousands of nodes if only `self` is needed)
};

// Options no backend can work with: ConfigError naming the field (instances, the elastic minimum,
// a heartbeat timeout not longer than the interval).
void check_options(const NodeSessionOptions& o);

struct JoinResult {
  JoinReply self;                 // node rank, world size, rank offset, MASTER_ADDR/PORT
  std::vector<NodeEntry> table;   // every node by rank (when fetch_table)
  int generation = 0;
  std::string local_address;      // our IP toward the store (DTRAIN_LOCAL_ADDR)
};

struct JoinProgress {
  bool reachable = true;          // false: the rendezvous does not answer yet (node 0 not up)
  std::string endpoint;           // "host:port" of the rendezvous
  std::string why;                // !reachable: the last connect error
  int joined = 0;
  int instances = 0;
  std::string missing;            // "node 2", "1 more node(s)", ...
  std::chrono::milliseconds elapsed{0};
  std::chrono::milliseconds timeout{0};
  // "waiting for nodes 2/3 (missing: node 2) 12 s / 600 s", or
  // "waiting for the rendezvous at 10.0.0.1:29400 (not reachable yet) 12 s / 600 s", or
  // "waiting for the rendezvous at m0:29400 (the name 'm0' does not resolve: ...) 2 s / 600 s"
  std::string line() const;
};

// The options of a rejoin under `generation`: as the node rank the last join got, so a restarted
// job keeps its node numbering.
void prepare_rejoin(NodeSessionOptions& o, const JoinResult& last, int generation);

using ProgressFn = std::function<void(const JoinProgress&)>;
using EventFn = std::function<void(const Event&)>;

// A node of the job (node >= 0, its host name in `host`) or the rendezvous itself (node -1, its
// endpoint in `host`) was lost: an agent went silent or its connection closed without finishing.
// The exit status of a lost node is exit_code::node_lost.
class NodeLostError : public IoError {
 public:
  NodeLostError(int node_rank, std::string host_name, const std::string& what)
      : IoError(what), node(node_rank), host(std::move(host_name)) {}
  int node;
  std::string host;
};

class Membership {
 public:
  virtual ~Membership() = default;

  // Blocks until the join barrier closes (or throws); join() the first generation, rejoin() a later one.
  virtual JoinResult join(const ProgressFn& progress = {}) = 0;
  virtual JoinResult rejoin(int generation, const ProgressFn& progress = {}) = 0;
  virtual void cancel_join() = 0;  // any thread: the join in progress throws Cancelled
  virtual void start_monitoring(EventFn on_event) = 0;
  virtual void stop_monitoring() = 0;
  virtual void set_local_state(std::string state, int running, int exited, int restarts) = 0;
  virtual void set_progress(std::string text) = 0;
  // The straggler report's figures: this node's, shared with the others (`nodes`: the job's node
  // count); the others' as they last published them, by node rank (empty where nothing is shared).
  virtual void set_figures(std::string text, int nodes) = 0;
  virtual std::map<int, std::string> peer_figures() const = 0;
  // Before start_monitoring: how this node answers `dtrain status --stacks --rdzv` (the text of its
  // ranks' stacks; called on a thread of the membership's own). The built-in backend answers while
  // it monitors (stacks_desk.hpp); the etcd backend does not (`dtrain status` reads the built-in
  // rendezvous only).
  virtual void set_stacks_source(StacksSource source) { (void)source; }
  virtual void report_failure(int rank, int exit_code, int signal, const std::string& message) = 0;
  virtual void report_stop(int exit_code, int signal, const std::string& message) = 0;
  virtual std::optional<Event> finish(std::chrono::milliseconds timeout) = 0;
  virtual std::optional<Event> root_cause() const = 0;
  virtual JoinResult result() const = 0;
};

}  // namespace dtrain::rdzv
