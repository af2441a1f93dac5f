#pragma once
// The state the server's loop thread shares between its parts: options, the loop, the open
// connections, the scopes, and the connections to resume (unparked with frames buffered).
#include <uv.h>

#include <list>
#include <vector>

#include "connection.hpp"
#include "dtrain/rendezvous/server.hpp"
#include "scope.hpp"

namespace dtrain::rdzv::srv {

struct Hub {
  explicit Hub(ServerOptions o) : opts(std::move(o)) {}

  ServerOptions opts;
  uv_loop_t* loop = nullptr;
  std::list<Conn*> conns;
  Scopes scopes;
  std::vector<Conn*> pump_queue;
  bool stopping = false;
};

}  // namespace dtrain::rdzv::srv
