#pragma once
// The first local failure of a generation on its way out (AgentHooks::on_local_failure, which tells
// the other nodes). It is held until that worker's output is read, so that it carries the last
// lines of its stderr and its first exception, and sent kTailWaitS after the exit at the latest (a
// process that left the worker's group may hold its stderr open), or when the generation ends.
// tests/agent/test_failure_notice.cpp.
#include <functional>
#include <optional>
#include <utility>

#include "dtrain/agent/worker_exit.hpp"
#include "event_loop.hpp"

namespace dtrain::agent {

class FailureNotice {
 public:
  static constexpr double kTailWaitS = 0.5;
  // Where a worker's output stands (the worker group's): whether it is read to its end, and its
  // last stderr lines and first exception so far.
  struct Output {
    std::function<bool(long pid)> done;
    std::function<void(WorkerExit& exit)> fill;
  };
  // Sends the failure (the generation it belongs to); empty: nothing is held or sent.
  using Send = std::function<void(WorkerExit& exit, int generation)>;

  FailureNotice(Output output, Send send) : output_(std::move(output)), send_(std::move(send)) {}

  // Throws IoError.
  void open(EventLoop& loop);
  // A worker of `generation` failed first: sent now if its output is read, else held.
  void hold(const WorkerExit& exit, int generation);
  // Sends the failure held once its worker's output is read, or now when `force`.
  void flush(bool force);
  void close() { timer_.close(); }

 private:
  Output output_;
  Send send_;
  std::optional<std::pair<WorkerExit, int>> held_;
  Timer timer_;
};

}  // namespace dtrain::agent
