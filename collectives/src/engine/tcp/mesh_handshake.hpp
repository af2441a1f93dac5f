#pragma once
// The TCP mesh's connection handshake as two pure state machines (no sockets): a rank that connects
// (the higher rank, "connector") and the rank that accepts ("acceptor") prove to each other that
// they hold the communicator's secret, 32 random bytes that its rank 0 put in the store under
// <key_prefix>tcp/secret (the store itself is authenticated with the job's token). HMAC-SHA256 over
// fresh nonces from both sides, the two ranks and the group size; the connector proves first and the
// acceptor answers only a proof it checked, so a stranger who connects to a worker's port learns
// nothing and is dropped. Messages (fixed sizes, in order):
//   connector -> acceptor  hello     magic "DTH1", rank, size, 0 (4 x 4 bytes) + connector nonce (32)
//   acceptor  -> connector challenge acceptor nonce (32)
//   connector -> acceptor  proof     HMAC(secret, "dtrain mesh connector" | acceptor nonce | connector nonce | ranks, size)
//   acceptor  -> connector proof     HMAC(secret, "dtrain mesh acceptor" | connector nonce | acceptor nonce | ranks, size)
// A rank is bound to its connection only once its proof checked (docs/wire-protocol.md, "The
// collectives' TCP mesh").
#include <cstddef>
#include <cstdint>
#include <string>

#include "dtrain/rendezvous/store/store.hpp"

namespace dtrain::coll::tcp::handshake {

inline constexpr std::uint32_t kMagic = 0x31485444;  // "DTH1"
inline constexpr std::size_t kSecretBytes = 32;
inline constexpr std::size_t kNonceBytes = 32;
inline constexpr std::size_t kHelloBytes = 16 + kNonceBytes;
inline constexpr std::size_t kChallengeBytes = kNonceBytes;
inline constexpr std::size_t kProofBytes = 32;

// What a message did: the bytes to send back (may be empty), done once the peer is proven, or the
// reason to drop the connection.
struct Step {
  rdzv::Bytes reply;
  bool done = false;
  std::string error;  // non-empty: drop the connection
};

// The accepting side: takes the hello, then the proof.
class Acceptor {
 public:
  // `nonce`: kNonceBytes fresh random bytes (rdzv::auth::random_nonce()).
  Acceptor(rdzv::ByteView secret, int rank, int size, rdzv::Bytes nonce);
  // Bytes the next message needs (0 once done or failed).
  std::size_t want() const;
  // One whole message of want() bytes.
  Step take(rdzv::ByteView msg);
  // The connector's group rank as its hello claimed it (-1 before the hello); proven once done.
  int peer() const { return peer_; }

 private:
  enum class State { hello, proof, done, failed };
  Step fail(std::string why);

  rdzv::Bytes secret_, nonce_, peer_nonce_;
  int rank_, size_;
  int peer_ = -1;
  State state_ = State::hello;
};

// The connecting side: hello() first, then takes the challenge and the acceptor's proof.
class Connector {
 public:
  Connector(rdzv::ByteView secret, int rank, int peer, int size, rdzv::Bytes nonce);
  rdzv::Bytes hello() const;
  std::size_t want() const;
  Step take(rdzv::ByteView msg);

 private:
  enum class State { challenge, proof, done, failed };

  rdzv::Bytes secret_, nonce_, peer_nonce_;
  int rank_, peer_, size_;
  State state_ = State::challenge;
};

// The two proofs (exposed for the tests): `connector_side` selects the label and the nonce order.
rdzv::Bytes proof(rdzv::ByteView secret, bool connector_side, rdzv::ByteView connector_nonce,
                  rdzv::ByteView acceptor_nonce, int connector_rank, int acceptor_rank, int size);

}  // namespace dtrain::coll::tcp::handshake
