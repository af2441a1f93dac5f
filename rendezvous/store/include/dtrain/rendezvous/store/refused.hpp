#pragma once
// A request that is well framed but refused (empty key, value over the limit, spec mismatch, ...):
// the server answers ERROR [code, message] and keeps the connection; the in-memory store throws
// what a TcpStore would throw for that reply. A malformed frame is a wire::ProtocolError instead,
// and the server drops the peer.
#include <stdexcept>
#include <string>

#include "dtrain/rendezvous/store/wire.hpp"

namespace dtrain::rdzv {

class Refused : public std::runtime_error {
 public:
  Refused(wire::ErrorCode c, const std::string& what) : std::runtime_error(what), code(c) {}
  wire::ErrorCode code;
};

}  // namespace dtrain::rdzv
