// The mesh's connection handshake (mesh_handshake.hpp): pure state machines over whole messages.
#include "mesh_handshake.hpp"

#include <cstring>
#include <string_view>

#include <fmt/format.h>

#include "dtrain/rendezvous/store/auth.hpp"

namespace dtrain::coll::tcp::handshake {
namespace {

void put32(rdzv::Bytes& b, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

std::uint32_t get32(rdzv::ByteView b, std::size_t at) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(b[at + static_cast<std::size_t>(i)]) << (8 * i);
  return v;
}

void append(rdzv::Bytes& b, rdzv::ByteView more) { b.insert(b.end(), more.begin(), more.end()); }

}  // namespace

rdzv::Bytes proof(rdzv::ByteView secret, bool connector_side, rdzv::ByteView connector_nonce,
                  rdzv::ByteView acceptor_nonce, int connector_rank, int acceptor_rank, int size) {
  const std::string_view label = connector_side ? "dtrain mesh connector" : "dtrain mesh acceptor";
  rdzv::Bytes msg(label.begin(), label.end());
  // Each side's proof puts the other side's nonce first: neither can be reflected as the other.
  append(msg, connector_side ? acceptor_nonce : connector_nonce);
  append(msg, connector_side ? connector_nonce : acceptor_nonce);
  put32(msg, static_cast<std::uint32_t>(connector_rank));
  put32(msg, static_cast<std::uint32_t>(acceptor_rank));
  put32(msg, static_cast<std::uint32_t>(size));
  return rdzv::auth::hmac_sha256(rdzv::to_string(secret), msg);
}

// ---- acceptor -------------------------------------------------------------------------------

Acceptor::Acceptor(rdzv::ByteView secret, int rank, int size, rdzv::Bytes nonce)
    : secret_(secret.begin(), secret.end()), nonce_(std::move(nonce)), rank_(rank), size_(size) {}

std::size_t Acceptor::want() const {
  switch (state_) {
    case State::hello: return kHelloBytes;
    case State::proof: return kProofBytes;
    default: return 0;
  }
}

Step Acceptor::fail(std::string why) {
  state_ = State::failed;
  return Step{{}, false, std::move(why)};
}

Step Acceptor::take(rdzv::ByteView msg) {
  if (msg.size() != want() || want() == 0) return fail("a message out of turn");
  if (state_ == State::hello) {
    const std::uint32_t magic = get32(msg, 0);
    const auto rank = static_cast<std::int32_t>(get32(msg, 4));
    const auto size = static_cast<std::int32_t>(get32(msg, 8));
    if (magic != kMagic) return fail(fmt::format("not a dtrain mesh greeting (first bytes 0x{:08x})", magic));
    if (size != size_) return fail(fmt::format("a greeting for a group of {} ranks, not {}", size, size_));
    if (rank <= rank_ || rank >= size_)
      return fail(fmt::format("a greeting from rank {}, which does not connect to rank {}", rank, rank_));
    peer_ = rank;
    peer_nonce_.assign(msg.begin() + 16, msg.end());
    state_ = State::proof;
    return Step{nonce_, false, {}};
  }
  const rdzv::Bytes expect = proof(secret_, true, peer_nonce_, nonce_, peer_, rank_, size_);
  if (!rdzv::auth::constant_time_equal(expect, msg))
    return fail(fmt::format("a wrong proof for rank {} (it does not hold this job's secret)", peer_));
  state_ = State::done;
  return Step{proof(secret_, false, peer_nonce_, nonce_, peer_, rank_, size_), true, {}};
}

// ---- connector ------------------------------------------------------------------------------

Connector::Connector(rdzv::ByteView secret, int rank, int peer, int size, rdzv::Bytes nonce)
    : secret_(secret.begin(), secret.end()), nonce_(std::move(nonce)), rank_(rank), peer_(peer), size_(size) {}

rdzv::Bytes Connector::hello() const {
  rdzv::Bytes h;
  put32(h, kMagic);
  put32(h, static_cast<std::uint32_t>(rank_));
  put32(h, static_cast<std::uint32_t>(size_));
  put32(h, 0);
  append(h, nonce_);
  return h;
}

std::size_t Connector::want() const {
  switch (state_) {
    case State::challenge: return kChallengeBytes;
    case State::proof: return kProofBytes;
    default: return 0;
  }
}

Step Connector::take(rdzv::ByteView msg) {
  if (msg.size() != want() || want() == 0) {
    state_ = State::failed;
    return Step{{}, false, "a message out of turn"};
  }
  if (state_ == State::challenge) {
    peer_nonce_.assign(msg.begin(), msg.end());
    state_ = State::proof;
    return Step{proof(secret_, true, nonce_, peer_nonce_, rank_, peer_, size_), false, {}};
  }
  if (!rdzv::auth::constant_time_equal(proof(secret_, false, nonce_, peer_nonce_, rank_, peer_, size_), msg)) {
    state_ = State::failed;
    return Step{{}, false, "a wrong proof from the listener (it does not hold this job's secret)"};
  }
  state_ = State::done;
  return Step{{}, true, {}};
}

}  // namespace dtrain::coll::tcp::handshake
