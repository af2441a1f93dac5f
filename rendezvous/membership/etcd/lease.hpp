#pragma once
// Lease: this node's lease in etcd and the thread that keeps it. Granted with the heartbeat timeout as
// its TTL (at least 2 s; 60 s when there is no heartbeat timeout, as far as etcd allows), renewed
// every heartbeat interval, revoked at the end: every key the node puts under it (its join request)
// goes with it, which is how the other nodes learn that it was lost. Once armed (while the node is
// monitored) a renewal that fails is the rendezvous lost: `on_lost` runs once and the keeper ends;
// during a join the join's own requests meet the same trouble.
//
// Threading: start(), end() and arm()/disarm() belong to the session's controlling thread; id() is
// thread-safe.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "client.hpp"

namespace dtrain::etcd {

class Lease {
 public:
  Lease(Client& client, std::chrono::milliseconds interval, std::chrono::milliseconds heartbeat_timeout);
  ~Lease() { end(); }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;

  void start();  // end(), then a new lease and its keeper (etcd's errors)
  void end();    // stops the keeper and revokes the lease (a failure is logged); idempotent
  std::int64_t id() const;  // 0 when there is none

  void arm(std::function<void(const std::string& why)> on_lost);
  void disarm();

 private:
  void keep();

  Client& client_;
  const std::chrono::milliseconds interval_;
  const std::chrono::seconds ttl_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::int64_t id_ = 0;
  bool stop_ = false;
  std::function<void(const std::string&)> on_lost_;  // armed
  std::thread keeper_;
};

}  // namespace dtrain::etcd
