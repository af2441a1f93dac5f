#pragma once
// The server side of the handshake (docs/wire-protocol.md), a pure state machine per connection:
// HELLO -> CHALLENGE (a fresh nonce, nothing that depends on the token), AUTH -> ready once the
// client's proof checks out; only then does the WELCOME carry the server's own proof. A malformed or out-of-order frame throws wire::ProtocolError
// (the peer is dropped); a refusal (wrong token, no token, wrong run id, negative generation) is
// returned with its reason, which the server sends as ERROR auth before closing.
#include <cstdint>
#include <string>

#include "dtrain/rendezvous/server/server.hpp"
#include "dtrain/rendezvous/store/wire.hpp"

namespace dtrain::rdzv {

class Handshake {
 public:
  enum class Stage { hello, auth, ready };
  struct Step {
    enum class Kind { reply, refuse, ready } kind = Kind::reply;
    wire::Frame reply;   // kind reply: the CHALLENGE to send
    std::string reason;  // kind refuse: why
  };

  // Takes the next frame from the client. Stage becomes auth after a good HELLO, ready after a good
  // AUTH (the caller then scopes the connection and sends WELCOME).
  Step step(const wire::Frame& f, const ServerOptions& opts);

  Stage stage() const { return stage_; }
  bool ready() const { return stage_ == Stage::ready; }
  // From HELLO: the client's name (for logs), run id and generation (its scope).
  const std::string& name() const { return name_; }
  // The WELCOME for a ready connection: the peer's address as seen here and the server's proof.
  wire::Frame welcome(std::string_view peer_ip, const ServerOptions& opts) const;
  const std::string& run_id() const { return run_id_; }
  std::int64_t generation() const { return generation_; }

 private:
  Step on_hello(const wire::Frame& f, const ServerOptions& opts);
  Step on_auth(const wire::Frame& f, const ServerOptions& opts);

  Stage stage_ = Stage::hello;
  std::string name_, run_id_;
  std::int64_t generation_ = 0;
  Bytes cnonce_, snonce_;
};

}  // namespace dtrain::rdzv
