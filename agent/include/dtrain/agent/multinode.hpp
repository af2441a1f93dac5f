#pragma once
// This node's part of a multi-node job: `dtrain launch job.json` on N nodes becomes one job.
//
//   - the node that may serve the rendezvous endpoint (node 0, or the node whose address the
//     endpoint names when node ranks are not known) serves the store on exactly that address,
//     unless the address is already served (a dedicated `dtrain rendezvous serve` host);
//   - every agent joins through rdzv::NodeSession (run id, host, node rank when known, local
//     slots, instances, spec hash) and waits for the barrier (live line on a terminal);
//   - the rank table gives the node its global ranks, WORLD_SIZE and MASTER_ADDR/MASTER_PORT;
//     the workers get DTRAIN_STORE_ADDR/_TOKEN (the rendezvous) and DTRAIN_LOCAL_ADDR;
//   - job events of the session (a worker failure anywhere, a lost node, a lost rendezvous) enter
//     the Agent through Agent::post; local failures leave through AgentHooks to the session;
//     each restart re-joins under generation g+1 (fresh keys, fresh MASTER_PORT);
//   - on success every agent passes the exit barrier, so the store outlives its last user; a
//     failure or a loss elsewhere ends the wait at once with that status.
//
// The parts (agent/src): node_config (settings, spec hash, rank table), node_role (serve or join),
// join_line (the waiting line), session_bridge (the pure state machine between session and agent,
// with the extension points for interrupts, stderr tails, spec mismatches and elastic membership),
// control_thread (the one thread that runs it). Every thread is joined before run_multinode returns.
//
// Exit statuses (dtrain-launch(1)): the root cause's status on every node (a worker's, or 130/143/
// 124/70 of a node that stopped on its own); 69 a node (or the rendezvous) was lost; 75 the join or
// exit barrier timed out; 77 the token or run id was refused; 2 a spec conflict between nodes (every
// node that joined is refused, naming the fields that differ) or a multi-node job without a token
// (unless insecure).
#include <functional>
#include <optional>
#include <string>

#include "dtrain/agent/options.hpp"

namespace dtrain::agent {

struct MultiNodeOptions {
  bool insecure = false;  // allow a multi-node job without a token (trusted network only)
  std::optional<std::string> token;  // given (by the head of a launch over hosts); else resolve_token's
  std::function<void()> joined;      // called once this node joined the job (the head hears of it)
};

// True when the plan needs the multi-node driver: several instances or a rendezvous endpoint.
bool is_multinode(const config::Plan& plan);

// A multi-node job needs a token (rdzv::auth::resolve_token's) unless `insecure`: ConfigError naming
// the ways to give one. With the etcd backend the token is not used; etcd's TLS or its users are
// needed instead (unless `insecure`, or one node on a loopback etcd). `dtrain plan` and `dtrain launch` refuse with this same check.
void check_token(const config::Plan& plan, const std::string& token, bool insecure);

// Runs this node's agent as part of the job described by `options.plan` (the options as for a
// single-node launch; the store fields are filled in here). Returns the exit status. Throws
// ConfigError, AuthError or TimeoutError for failures before any worker started, and what
// Agent::run() throws (after telling the other nodes, as for a command that cannot run).
int run_multinode(AgentOptions options, const MultiNodeOptions& mn = {});

}  // namespace dtrain::agent
