#pragma once
// One join of the built-in rendezvous (NodeSession::join): connects, retrying for the join timeout
// since node 0 may start long after the others (each failed attempt reported to `progress` as "not
// reachable yet"), sends JOIN, relays the barrier's progress frames, follows an elastic job that
// sends it on to the generation gathering nodes (Moved, a few hops at most; opts.store.generation
// follows), and fetches the rank table. The connection that joined stays the node's session.
//
// Errors: as NodeSession::join (node_session.hpp); Cancelled once `cancel` was cancelled.
#include <memory>

#include "dtrain/rendezvous/membership/membership.hpp"
#include "dtrain/rendezvous/membership/join_cancel.hpp"

namespace dtrain::rdzv {

struct Joined {
  JoinResult result;
  std::unique_ptr<TcpStore> session;
};

Joined join_rendezvous(NodeSessionOptions& opts, JoinCancel& cancel, const ProgressFn& progress);

}  // namespace dtrain::rdzv
