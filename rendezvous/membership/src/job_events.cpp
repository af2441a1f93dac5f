// JobEvents (job_events.hpp): one delivery of each job event, and the root cause.
#include "dtrain/rendezvous/membership/job_events.hpp"

#include <exception>
#include <utility>

#include "dtrain/common/log.hpp"

namespace dtrain::rdzv {

bool fatal_event(const Event& e) { return e.kind == "failure" || e.kind == "stopped" || e.kind == "lost"; }

void JobEvents::set_handler(EventFn fn) {
  std::lock_guard lock(mu_);
  handler_ = std::move(fn);
}

void JobEvents::reset() {
  std::lock_guard lock(mu_);
  last_seq_ = 0;
  lost_seen_ = false;
  loss_expected_ = false;
  root_.reset();
  on_root_ = nullptr;
}

void JobEvents::deliver(const Event& e) {
  std::lock_guard serial(deliver_mu_);
  EventFn fn;
  std::function<void()> on_root;
  {
    std::lock_guard lock(mu_);
    if (e.seq > 0) {
      if (e.seq <= last_seq_) return;
      last_seq_ = e.seq;
    } else {
      bool seen = std::exchange(lost_seen_, true);
      cv_.notify_all();
      if (seen || loss_expected_) return;
    }
    if (!root_ && fatal_event(e)) {
      root_ = e;
      on_root = std::exchange(on_root_, nullptr);
      cv_.notify_all();
    }
    fn = handler_;
  }
  if (on_root) on_root();
  if (!fn) return;
  try {
    fn(e);
  } catch (const std::exception& ex) {
    DTRAIN_WARN(rdzv, "job event callback threw: {}", ex.what());
  }
}

std::optional<Event> JobEvents::enter_exit_barrier(std::function<void()> on_root, bool loss_expected) {
  std::lock_guard lock(mu_);
  loss_expected_ = loss_expected;
  if (!root_) on_root_ = std::move(on_root);
  return root_;
}

std::optional<Event> JobEvents::wait_root_or_loss(std::chrono::milliseconds t) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, t, [&] { return root_.has_value() || lost_seen_; });
  return root_;
}

std::optional<Event> JobEvents::root() const {
  std::lock_guard lock(mu_);
  return root_;
}

std::int64_t JobEvents::last_seq() const {
  std::lock_guard lock(mu_);
  return last_seq_;
}

}  // namespace dtrain::rdzv
