#pragma once
// The worker's side of the progress page (dtrain/common/progress_page.hpp): each collective call
// is published to the agent that started this worker, when it set DTRAIN_PROGRESS_FILE. Two hook
// lines in comm.cpp: note() when a call is numbered, a Scope around its run. Without the variable
// (or when the file cannot be mapped) both cost one branch.
#include <cstddef>
#include <cstdint>

#include "engine.hpp"

namespace dtrain::coll::progress {

// The call about to run on this thread (published by the next Scope).
void note(const OpDesc& d);

// Publishes the noted call as begun, and as returned when it ends (however it ends).
class Scope {
 public:
  Scope();
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  bool active_ = false;
};

}  // namespace dtrain::coll::progress
