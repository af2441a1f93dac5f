#pragma once
// The listening socket: resolves the address to bind exactly as given, binds, listens, and hands
// each pending connection to accept_conn (connection.hpp).
#include <uv.h>

#include "dtrain/common/uv_handle.hpp"

namespace dtrain::rdzv::srv {

struct ServerState;

// Binds server.opts.host:port on server.loop and listens; returns the bound port (the free one picked for
// port 0). Throws IoError naming the address and what to do (in use, no such interface).
int listen_on(ServerState& server, UvHandle<uv_tcp_t>& listener);

}  // namespace dtrain::rdzv::srv
