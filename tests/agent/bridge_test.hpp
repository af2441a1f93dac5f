#pragma once
// What the tests of the multi-node bridge share (test_session_bridge.cpp, test_root_cause.cpp): a
// bridge for node kSelf of 2, a worker's exit, a failure event as the rendezvous hands it out, and
// the one action of a step.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "session_bridge.hpp"

namespace bridge_test {

using namespace dtrain::agent;
using namespace dtrain::agent::bridge;

constexpr int kSelf = 0;

inline SessionBridge make(int node_rank = kSelf) {
  return SessionBridge(BridgeConfig{node_rank, 2, "10.0.0.1:29400", std::chrono::milliseconds(5000)});
}

// A bridge whose generation 0 is joined (its go already handed out).
inline SessionBridge joined(int node_rank = kSelf) {
  auto b = make(node_rank);
  b.on(Joined{0, 4000});
  return b;
}

inline WorkerExit worker_exit(int rank, int code, int sig = 0, int pid = 1234) {
  WorkerExit w;
  w.rank = rank;
  w.local_rank = rank % 2;
  w.pid = pid;
  w.exit_code = code;
  w.signal = sig;
  return w;
}

inline dtrain::rdzv::Event failure(std::int64_t seq, int node, int rank, int code, int sig,
                                   const std::string& message) {
  dtrain::rdzv::Event e;
  e.seq = seq;
  e.kind = "failure";
  e.node = node;
  e.host = "h" + std::to_string(node);
  e.rank = rank;
  e.exit_code = code;
  e.signal = sig;
  e.message = message;
  return e;
}

// (copies: the action lists are temporaries)
template <class T>
T only(const std::vector<Action>& a) {
  REQUIRE(a.size() == 1);
  REQUIRE(std::holds_alternative<T>(a[0]));
  return std::get<T>(a[0]);
}

}  // namespace bridge_test
