#pragma once
// Who hosts the rendezvous of a multi-node job. The node that may be node 0 (its rank is 0, or not
// known yet) serves the store on exactly the endpoint's address when that address is ours and free;
// every other node joins. An address already served here (a dedicated `dtrain rendezvous serve`, or
// another agent of this machine that bound it first when node ranks are not given) is joined.
#include <memory>

#include "dtrain/rendezvous/server/server.hpp"
#include "node_config.hpp"

namespace dtrain::agent {

enum class Role { serve, join };

// node_rank: -1 when not known yet; bind_errno: net::bind_probe of the endpoint (0: free here,
// EADDRNOTAVAIL: not our address, EADDRINUSE: served here already).
Role choose_role(int node_rank, int bind_errno);

// Starting the server failed; `bind_errno` probes the endpoint again: true when another process
// bound it in between (join it), false when the failure stands.
bool joins_after_failed_start(int bind_errno);

// Serves the endpoint when choose_role() says so (logging the choice); nullptr: this node joins.
// Throws what Server::start() throws when the failure is not a lost race for the address.
std::unique_ptr<rdzv::Server> serve_if_ours(const NodeConfig& c);

}  // namespace dtrain::agent
