#pragma once
// The worker's side of the progress page (dtrain/common/progress_page.hpp): each collective call
// is published to the agent that started this worker, when it set DTRAIN_PROGRESS_FILE. One hook in
// comm.hpp: a Scope around the call's run. Without the variable (or when the file cannot be
// mapped) it costs one branch; with it, a few stores and one read of the coarse clock at the end
// (the beginning is the call's OpDesc::start).
#include <cstddef>
#include <cstdint>

#include "call.hpp"

namespace dtrain::coll::progress {

// Publishes the call `d` (null: nothing, e.g. point-to-point) as begun, and as returned when it
// ends (however it ends).
class Scope {
 public:
  explicit Scope(const OpDesc* d);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  bool active_ = false;
};

}  // namespace dtrain::coll::progress
