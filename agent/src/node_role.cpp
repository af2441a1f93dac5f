// Serve or join the rendezvous (node_role.hpp).
#include "node_role.hpp"

#include <cerrno>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/log.hpp"

namespace dtrain::agent {

Role choose_role(int node_rank, int bind_errno) {
  return node_rank <= 0 && bind_errno == 0 ? Role::serve : Role::join;
}

bool joins_after_failed_start(int bind_errno) { return bind_errno == EADDRINUSE; }

std::unique_ptr<rdzv::Server> serve_if_ours(const NodeConfig& c) {
  if (c.node_rank > 0) return nullptr;  // not node 0: no need to probe
  int err = net::bind_probe(c.ep.host, c.ep.port);
  if (choose_role(c.node_rank, err) == Role::join) {
    if (c.node_rank == 0)
      DTRAIN_INFO(agent, "not serving the rendezvous {} ({}): joining it", c.endpoint, errno_text(err));
    return nullptr;
  }
  rdzv::ServerOptions so;
  so.host = c.ep.host;
  so.port = c.ep.port;
  so.token = c.token;
  so.insecure = c.insecure;
  so.run_id = c.run_id;
  auto server = std::make_unique<rdzv::Server>(so);
  try {
    server->start();
  } catch (const IoError& e) {
    // another agent of this machine bound it first (node ranks not given): join it
    if (!joins_after_failed_start(net::bind_probe(c.ep.host, c.ep.port))) throw;
    DTRAIN_INFO(agent, "not serving the rendezvous {}: {}", c.endpoint, e.what());
    return nullptr;
  }
  DTRAIN_INFO(agent, "serving the rendezvous on {} for run '{}'", server->endpoint(), c.run_id);
  return server;
}

}  // namespace dtrain::agent
