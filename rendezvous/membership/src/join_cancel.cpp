// JoinCancel (join_cancel.hpp).
#include "dtrain/rendezvous/membership/join_cancel.hpp"

#include <fmt/format.h>

#include <utility>

namespace dtrain::rdzv {

JoinCancel::JoinCancel() : canceller_(std::make_shared<Canceller>()) {}

void JoinCancel::cancel() {
  std::lock_guard lock(mu_);  // held while closing: the Closing's owner cannot end meanwhile
  cancelled_ = true;
  cv_.notify_all();
  canceller_->raise();                          // connect retries and the handshake
  if (auto close = std::exchange(close_, nullptr)) close();  // the join's own wait
}

void JoinCancel::check(const std::string& where) const {
  std::lock_guard lock(mu_);
  if (cancelled_) throw Cancelled(fmt::format("joining the rendezvous at {}: cancelled", where));
}

bool JoinCancel::wait_for(std::chrono::milliseconds t) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, t, [&] { return cancelled_; });
}

JoinCancel::Closing JoinCancel::closing(std::function<void()> close) {
  std::lock_guard lock(mu_);
  if (!cancelled_) close_ = std::move(close);
  return Closing(*this);
}

JoinCancel::Closing::~Closing() {
  std::lock_guard lock(c_.mu_);
  c_.close_ = nullptr;
}

}  // namespace dtrain::rdzv
