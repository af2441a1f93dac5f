#pragma once
// Routes a connection's frames: through the handshake until it is ready, then by wire operation to
// its handler (handlers.hpp). A refusal is answered with ERROR and the connection is kept; a frame
// that is not a request throws wire::ProtocolError and the peer is dropped.
#include "connection.hpp"

namespace dtrain::rdzv::srv {

void handle_frame(Conn& c, const wire::Frame& f);

}  // namespace dtrain::rdzv::srv
