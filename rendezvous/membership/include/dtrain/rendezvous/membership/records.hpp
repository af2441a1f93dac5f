#pragma once
// Records of the node coordination protocol (join reply, rank table, job events, status), shared by
// the server, NodeSession and `dtrain status`. They travel packed (wire::pack) inside value frames.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dtrain/rendezvous/store/store.hpp"

namespace dtrain::rdzv {

// What one agent learns when the join barrier closes.
struct JoinReply {
  int node_rank = -1;
  int nnodes = 0;
  int world_size = 0;   // sum of every node's slots
  int rank_offset = 0;  // global rank of this node's local rank 0
  int slots = 0;
  std::string master_addr;  // node 0's address (MASTER_ADDR)
  int master_port = 0;      // the free port node 0 proposed (MASTER_PORT)
};

// One row of the rank table.
struct NodeEntry {
  int node_rank = -1;
  std::string host;
  std::string addr;
  int slots = 0;
  int rank_offset = 0;
};

// A job event, in the order the server saw them (seq from 1). kind: "failure" (a worker failed,
// reported by its agent), "stopped" (a node stopped on its own: a signal, max_runtime_s, a hang;
// exit_code is what it ends with, message says why), "lost" (an agent went silent or its connection
// closed). The first of a generation is the root cause.
struct Event {
  std::int64_t seq = 0;
  std::int64_t generation = 0;
  std::string kind;
  int node = -1;
  std::string host;
  int rank = -1;       // global rank of the failed worker, -1 when not a worker failure
  int exit_code = 0;   // worker exit status, or 0 when it died by a signal
  int signal = 0;      // signal number, 0 when it exited
  std::string message;
  bool root_cause = false;
};

// How an agent's failure report begins when the failed rank's collectives only saw a peer fail
// ("local rank 1, pid 812 (its collectives saw rank 3 fail); ..."): such a failure is not the root
// cause when a failure of a worker of its own follows (agent/src/session_bridge.hpp, agreed_root).
inline constexpr std::string_view kSawPeerFail = "(its collectives saw ";
// A worker failure (not killed by a signal) whose report's first line says so.
bool saw_peer_fail(const Event& e);
// How an agent's failure report begins when the job hung on that (live) rank
// ("local rank 1, pid 812; hung (state T stopped): never reached allreduce #95; rank 2 waits in it").
inline constexpr std::string_view kHungReport = "; hung";
bool hung_report(const Event& e);

// "node 1 (h1): rank 5 exited with code 3: <message>", "node 1 (h1): rank 3 hung: <message>",
// "node 2 (h2) lost: <message>",
// "node 1 (h1) interrupted (SIGINT)" (a "stopped" event: where, then its message)
std::string describe_event(const Event& e);

// The "lost" event of an agent that lost the rendezvous itself: node -1, `where` names the
// rendezvous ("10.0.0.1:29400", "etcd 10.0.0.1:2379").
Event rendezvous_lost(std::string where, std::string message);

struct NodeStatus {
  int node_rank = -1;
  std::string host, addr, state;  // state: joining, joined, running, stopping, done, lost, ...
  int slots = 0;
  std::int64_t running = 0, exited = 0, restarts = 0;
  std::int64_t heartbeat_age_ms = 0;
};

struct RunStatus {
  std::string run_id;
  std::int64_t generation = 0;
  int instances = 0, joined = 0, world_size = 0;
  bool closed = false;
  std::string master_addr;
  int master_port = 0;
  std::string root_cause;  // describe_event of the root cause, empty when none
  std::vector<NodeStatus> nodes;
};

Bytes pack_join_reply(const JoinReply& r);
JoinReply unpack_join_reply(ByteView b);
Bytes pack_node_entry(const NodeEntry& n);
NodeEntry unpack_node_entry(ByteView b);
Bytes pack_event(const Event& e);
Event unpack_event(ByteView b);
Bytes pack_run_status(const RunStatus& s);
RunStatus unpack_run_status(ByteView b);

}  // namespace dtrain::rdzv
