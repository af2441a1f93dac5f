#pragma once
// Parking of blocking requests (GET, BARRIER, JOIN, WATCH, LEAVE): a parked connection sits in one
// wait list of its scope, with a timer for its timeout, and reads no further frame until it is
// answered. unpark() takes it out of whatever it waits on; the timeout hands it to the waiting
// operation's own timeout answer (handlers.hpp).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "connection.hpp"

namespace dtrain::rdzv::srv {

// Connections waiting on one thing, in arrival order.
using Waiters = std::vector<Conn*>;

inline void remove_waiter(Waiters& v, Conn* c) { v.erase(std::remove(v.begin(), v.end(), c), v.end()); }

// Marks c parked on `what` (the caller has put it in the matching wait list) and starts its timer.
void park(Conn& c, Park what, std::string key, std::int64_t timeout_ms);

// Removes c from the wait list it is in and stops its timer. With `resume`, frames it buffered
// meanwhile are queued for drain_pumps().
void unpark(Conn& c, bool resume = true);

// Hands every waiter the same encoded reply, unparking each first.
void release_all(Waiters waiters, const std::shared_ptr<const Bytes>& reply);

}  // namespace dtrain::rdzv::srv
