#pragma once
// The state the server's loop thread shares between its parts: options, the loop, the open
// connections, the scopes, and the connections to resume (unparked with frames buffered).
#include <uv.h>

#include <list>
#include <vector>

#include "connection.hpp"
#include "dtrain/rendezvous/server/server.hpp"
#include "drop_log.hpp"
#include "scope.hpp"

namespace dtrain::rdzv::srv {

struct ServerState {
  explicit ServerState(ServerOptions o)
      : opts(std::move(o)),
        scopes(KvLimits{opts.max_keys_per_run, opts.max_bytes_per_run}, KvLimits{opts.max_keys_total, opts.max_bytes_total}) {}

  ServerOptions opts;
  uv_loop_t* loop = nullptr;
  std::list<Conn*> conns;      // every open connection, newest first
  std::list<Conn*> pending;    // those still in the handshake, oldest first
  std::size_t max_conns = 0;   // opts.max_connections, lowered to fit the open-files limit (start)
  DropLog drops;               // "dropped ..." lines, rate-limited
  Scopes scopes;
  std::vector<Conn*> pump_queue;
  bool stopping = false;
};

}  // namespace dtrain::rdzv::srv
