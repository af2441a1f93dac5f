// The first local failure on its way out (failure_notice.hpp).
#include "failure_notice.hpp"

namespace dtrain::agent {

void FailureNotice::open(EventLoop& loop) {
  timer_.open(loop, [this] { flush(true); });
}

void FailureNotice::hold(const WorkerExit& exit, int generation) {
  if (!send_) return;
  held_.emplace(exit, generation);
  flush(false);
  if (held_) timer_.start(kTailWaitS);
}

void FailureNotice::flush(bool force) {
  if (!held_ || (!force && !output_.done(held_->first.pid))) return;
  auto [exit, generation] = std::move(*held_);
  held_.reset();
  timer_.stop();
  output_.fill(exit);
  send_(exit, generation);
}

}  // namespace dtrain::agent
