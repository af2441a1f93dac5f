#pragma once
// What the tests of both membership backends (test_node_session.cpp, etcd/test_etcd_session.cpp)
// share: a sink for the job events a session's watcher thread delivers, and joining several
// sessions at once (nodes as threads).
#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "dtrain/rendezvous/membership/membership.hpp"

namespace membership_test {

struct Events {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<dtrain::rdzv::Event> got;

  dtrain::rdzv::EventFn fn() {
    return [this](const dtrain::rdzv::Event& e) {
      std::lock_guard lock(mu);
      got.push_back(e);
      cv.notify_all();
    };
  }
  // The first event of `kind` (any kind when empty) delivered within `t`.
  std::optional<dtrain::rdzv::Event> wait(std::chrono::milliseconds t, const std::string& kind = {}) {
    std::unique_lock lock(mu);
    std::optional<dtrain::rdzv::Event> found;
    cv.wait_for(lock, t, [&] {
      for (const auto& e : got)
        if (kind.empty() || e.kind == kind) {
          found = e;
          break;
        }
      return found.has_value();
    });
    return found;
  }
};

// Joins every session at once; their results in the order of `sessions`.
template <class Session>
std::vector<dtrain::rdzv::JoinResult> join_all(std::vector<std::unique_ptr<Session>>& sessions) {
  std::vector<std::future<dtrain::rdzv::JoinResult>> fs;
  for (auto& s : sessions) fs.push_back(std::async(std::launch::async, [&s] { return s->join(); }));
  std::vector<dtrain::rdzv::JoinResult> out;
  for (auto& f : fs) out.push_back(f.get());
  return out;
}

}  // namespace membership_test
