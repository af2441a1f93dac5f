#pragma once
// The exit barrier of one scope (LEAVE), pure: a node that leaves is done (its disconnect is no
// longer a loss); the barrier is finished once every node of the join barrier left. A node lost
// meanwhile fails the caller with Refused lost.
#include <cstdint>
#include <string>

#include "dtrain/rendezvous/membership/join_barrier.hpp"

namespace dtrain::rdzv {

class ExitBarrier {
 public:
  // Marks n done. Returns true when that finishes the barrier (every node left), false when the
  // caller must wait. Refused lost when some node of the job was lost (n stays done).
  bool leave(Node& n, const JoinBarrier& join);
  bool finished() const { return finished_; }
  int left() const { return left_; }
  // "exit barrier timed out after 5 s: 1 of 2 nodes finished; missing: node 1 (h1)"
  std::string timeout_text(const JoinBarrier& join, std::int64_t ms) const;

 private:
  int left_ = 0;
  bool finished_ = false;
};

}  // namespace dtrain::rdzv
