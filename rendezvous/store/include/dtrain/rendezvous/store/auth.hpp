#pragma once
// Shared-token authentication for the rendezvous (docs/wire-protocol.md, "Handshake and auth").
// Both sides prove they hold the token with HMAC-SHA256 over fresh nonces from each side, the run id
// and the generation; the token itself never crosses the wire. The client proves first; the server
// sends its own proof only to a client whose proof it checked, so a stranger who connects learns
// nothing to test token guesses against. Proofs are compared in constant time.
#include <string>
#include <string_view>

#include "dtrain/rendezvous/store/store.hpp"

namespace dtrain::rdzv::auth {

inline constexpr std::size_t kNonceBytes = 32;
inline constexpr std::size_t kProofBytes = 32;
// A token must be able to hold this much randomness (token_bits); `dtrain token` makes 256 bits.
inline constexpr std::size_t kMinTokenBits = 128;
inline constexpr std::size_t kNewTokenBytes = 32;
// The first line of a token file is read up to this many bytes; a longer one is refused.
inline constexpr std::size_t kMaxTokenFileLine = 4096;

// kNonceBytes from the OS CSPRNG (getrandom); throws IoError if it fails.
Bytes random_nonce();
// HMAC-SHA256 by OpenSSL's libcrypto, which the first call loads (dlopen); throws IoError when it
// cannot be loaded.
Bytes hmac_sha256(std::string_view key, ByteView message);
bool constant_time_equal(ByteView a, ByteView b);

// The proofs: role is "server" or "client"; first_nonce is the peer's nonce for the server proof
// (client nonce first) and ours for the client proof (server nonce first), so neither proof can be
// replayed as the other.
Bytes proof(std::string_view token, std::string_view role, ByteView first_nonce, ByteView second_nonce,
            std::string_view run_id, std::int64_t generation);

// The most randomness the token's text can hold: 4 bits a character when it is all hex digits,
// 6 when it is all base64 (or base64url) characters, else 8 bits a byte. A guessable token may
// still pass: this refuses only tokens too short to be strong.
std::size_t token_bits(std::string_view token);
// Throws ConfigError naming `where` (the file or variable) and how to make a strong token when the
// token is non-empty and holds fewer than kMinTokenBits.
void check_token_strength(std::string_view token, std::string_view where);
// kNewTokenBytes from the OS CSPRNG as lowercase hex (64 characters, 256 bits).
std::string new_token();

// Reads a token file: the first line without trailing whitespace, at most kMaxTokenFileLine bytes.
// Throws ConfigError naming the file when it cannot be read, is empty or its first line is too
// long; logs a warning when others may read it.
std::string read_token_file(const std::string& path);

// The shared token: read_token_file(path) when a path is given (non-empty), else DTRAIN_RDZV_TOKEN
// ("" when that is unset too). Refuses a weak token (check_token_strength).
std::string resolve_token(std::string_view path);

}  // namespace dtrain::rdzv::auth
