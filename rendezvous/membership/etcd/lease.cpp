// Lease (lease.hpp): this node's lease in etcd and its keeper thread.
#include "lease.hpp"

#include <algorithm>
#include <utility>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/log.hpp"
#include "etcd_records.hpp"

namespace dtrain::etcd {
namespace {

constexpr std::chrono::seconds kNoTimeoutTtl{60};  // heartbeat_timeout 0: never lost for silence, as far as etcd allows
constexpr std::chrono::seconds kMinTtl{2};

std::chrono::seconds ttl_for(std::chrono::milliseconds heartbeat_timeout) {
  auto ttl = heartbeat_timeout.count() > 0 ? std::chrono::ceil<std::chrono::seconds>(heartbeat_timeout) : kNoTimeoutTtl;
  return std::max(ttl, kMinTtl);
}

}  // namespace

Lease::Lease(Client& client, std::chrono::milliseconds interval, std::chrono::milliseconds heartbeat_timeout)
    : client_(client), interval_(interval), ttl_(ttl_for(heartbeat_timeout)) {}

void Lease::start() {
  end();
  std::int64_t id = client_.lease_grant(ttl_);
  std::lock_guard lock(mu_);
  id_ = id;
  stop_ = false;
  keeper_ = std::thread([this] { keep(); });
}

void Lease::end() {
  std::int64_t id;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    id = std::exchange(id_, 0);
  }
  cv_.notify_all();
  if (keeper_.joinable()) keeper_.join();
  if (id == 0) return;
  try {
    client_.lease_revoke(id);
  } catch (const Error& e) {
    DTRAIN_DEBUG(rdzv, "etcd {}: revoking lease {}: {}", client_.endpoint(), Keys::lease_text(id), e.what());
  }
}

std::int64_t Lease::id() const {
  std::lock_guard lock(mu_);
  return id_;
}

void Lease::arm(std::function<void(const std::string&)> on_lost) {
  std::lock_guard lock(mu_);
  on_lost_ = std::move(on_lost);
}

void Lease::disarm() {
  std::lock_guard lock(mu_);
  on_lost_ = nullptr;
}

void Lease::keep() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait_for(lock, interval_, [&] { return stop_; });
    if (stop_) return;
    std::int64_t id = id_;
    lock.unlock();
    std::string failed;
    try {
      client_.lease_keepalive(id);
    } catch (const Error& e) {
      failed = e.what();
    }
    lock.lock();
    if (stop_) return;
    if (!failed.empty() && on_lost_) {
      auto on_lost = on_lost_;
      lock.unlock();
      on_lost(fmt::format("renewing this node's lease failed: {}", failed));
      return;
    }
  }
}

}  // namespace dtrain::etcd
