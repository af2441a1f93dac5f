#pragma once
// One join of the membership on etcd (EtcdSession::join): a lease (lease.hpp) holds this node's
// join request under g/<G>/node/. Every joiner feeds the requests it sees (etcd revision order) into
// the same pure join barrier the built-in rendezvous runs (membership/join_barrier.hpp); the first
// whose barrier is ready writes g/<G>/table in a transaction that succeeds only while there is none,
// and every node takes its row from that table. A generation that already has a table is running: a
// fixed job refuses the joiner; an elastic one with room ends it with a "joined" event and the
// joiner (then every node) meets again in G+1. etcd not answering is retried, reported to
// `progress` as not reachable, until the join timeout.
//
// Errors: as NodeSession::join (node_session.hpp); Cancelled once `cancel` was cancelled.
#include <cstdint>

#include "client.hpp"
#include "dtrain/rendezvous/membership/join_cancel.hpp"
#include "dtrain/rendezvous/membership/membership.hpp"
#include "etcd_records.hpp"
#include "lease.hpp"

namespace dtrain::etcd {

// What a join works with: the session's client, keys, options, lease (started by the join) and
// cancellation.
struct JoinContext {
  Client& client;
  const Keys& keys;
  const rdzv::NodeSessionOptions& opts;
  Lease& lease;
  rdzv::JoinCancel& cancel;
};

struct EtcdJoined {
  rdzv::JoinResult result;
  Table table;                     // the table that closed the barrier
  std::int64_t table_revision = 0; // its revision: the session watches from just after it
};

// Joins generation `generation` or, for an elastic job, the later one that gathers its nodes.
EtcdJoined join_etcd(const JoinContext& c, std::int64_t generation, const rdzv::ProgressFn& progress);

}  // namespace dtrain::etcd
