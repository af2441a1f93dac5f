#pragma once
// Heartbeats and lost nodes, pure: HEARTBEAT refreshes a joined node and carries its state for
// STATUS; a node silent for longer than the job's heartbeat timeout is found by the server's tick
// (every 100 ms) and declared lost.
#include <chrono>
#include <optional>
#include <string>

#include "dtrain/rendezvous/membership/join_barrier.hpp"

namespace dtrain::rdzv {

// Applies HEARTBEAT [state, running, exited, restarts] from the connection's node (null: it has not
// joined). Refused not_joined before the barrier closed, lost once the node was declared lost;
// wire::ProtocolError for missing arguments.
void record_heartbeat(Node* n, const JoinBarrier& join, const wire::Frame& f, Clock::time_point now);

struct Silent {
  Node* node = nullptr;
  std::string why;  // "no heartbeat for 16.1 s (timeout 15.0 s)"
};

// The first node, in join order, neither lost nor left, silent for longer than the join barrier's
// heartbeat timeout at `now`. Nothing before the barrier closed or without a timeout.
std::optional<Silent> first_silent(const JoinBarrier& join, Clock::time_point now);

}  // namespace dtrain::rdzv
