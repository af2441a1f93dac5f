#pragma once
// STATUS, pure: the RunStatus record of one scope (the latest generation of a run with nodes).
#include <cstdint>
#include <string>

#include "dtrain/rendezvous/membership/records.hpp"
#include "event_log.hpp"
#include "dtrain/rendezvous/membership/join_barrier.hpp"

namespace dtrain::rdzv {

// Nodes sorted by node rank (the rank asked for while the barrier is open), heartbeat ages at now.
RunStatus run_status(const std::string& run_id, std::int64_t generation, const JoinBarrier& join,
                     const EventLog& events, Clock::time_point now);

}  // namespace dtrain::rdzv
