#pragma once
// What travels on a TCP engine socket: every message is a WireHeader and its payload, on one of two
// channels: a collective's (channel.hpp) or a point-to-point message's (p2p.hpp); and last, from a
// rank that gave up on a collective, a kGiveUp header. A point-to-point
// frame that a collective meets on the way (the peer sent it before entering the collective) is
// read whole into the peer's Inbox, where the matching receive finds it. Both ends run the same
// build: host byte order.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <deque>
#include <vector>

#include "../../call.hpp"

namespace dtrain::coll::tcp {

struct WireHeader {
  std::uint32_t magic;
  std::uint32_t channel;  // kCollective, kP2p or kGiveUp
  std::uint64_t seq;      // the collective call's number, or the message's number between the pair
  std::uint64_t fp0;      // fingerprint (OpDesc or P2pDesc)
  std::uint64_t fp1;
  std::uint64_t len;      // payload bytes that follow
};
static_assert(sizeof(WireHeader) == 40);
inline constexpr std::uint32_t kWireMagic = 0x3147534d;  // "MSG1"
inline constexpr std::uint32_t kCollective = 0;
inline constexpr std::uint32_t kP2p = 1;
// A header alone, on the control channel: its sender gave up on collective call seq and sends nothing
// more (failures.hpp).
inline constexpr std::uint32_t kGiveUp = 2;

// A point-to-point frame read off the socket before its receive came.
struct Parked {
  WireHeader h;
  std::vector<std::uint8_t> payload;
};
// Per peer, the frames parked in arrival order.
using Inbox = std::vector<std::deque<Parked>>;

// Milliseconds from now to the deadline, clamped to 0..1000: a poll() timeout.
inline int ms_left(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 1000));
}

// A socket call that may be retried (non-blocking socket not ready, or interrupted).
inline bool transient(int err) { return err == EAGAIN || err == EWOULDBLOCK || err == EINTR; }

}  // namespace dtrain::coll::tcp
