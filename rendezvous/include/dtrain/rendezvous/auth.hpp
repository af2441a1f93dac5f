#pragma once
// Shared-token authentication for the rendezvous (docs/wire-protocol.md, "Handshake and auth").
// Both sides prove they hold the token with HMAC-SHA256 over fresh nonces from each side, the run id
// and the generation; the token itself never crosses the wire. Proofs are compared in constant time.
#include <string>
#include <string_view>

#include "dtrain/rendezvous/store.hpp"

namespace dtrain::rdzv::auth {

inline constexpr std::size_t kNonceBytes = 32;
inline constexpr std::size_t kProofBytes = 32;

// kNonceBytes from the OS CSPRNG (OpenSSL RAND_bytes); throws IoError if it fails.
Bytes random_nonce();
Bytes hmac_sha256(std::string_view key, ByteView message);
bool constant_time_equal(ByteView a, ByteView b);

// The proofs: role is "server" or "client"; first_nonce is the peer's nonce for the server proof
// (client nonce first) and ours for the client proof (server nonce first), so neither proof can be
// replayed as the other.
Bytes proof(std::string_view token, std::string_view role, ByteView first_nonce, ByteView second_nonce,
            std::string_view run_id, std::int64_t generation);

// Reads a token file: the first line without trailing whitespace. Throws ConfigError naming the
// file when it cannot be read or is empty; logs a warning when others may read it.
std::string read_token_file(const std::string& path);

// The shared token: read_token_file(path) when a path is given (non-empty), else DTRAIN_RDZV_TOKEN
// ("" when that is unset too).
std::string resolve_token(std::string_view path);

}  // namespace dtrain::rdzv::auth
