#pragma once
// The store's BARRIER semantics, shared by the rendezvous server (waiters are connections) and the
// in-memory store (waiters are blocked threads): a barrier of `count` releases every waiter when the
// count-th arrives, then resets; every caller of one round must name the same count. Pure: the
// caller wakes the waiters it is handed and removes the ones that give up.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "dtrain/rendezvous/store/refused.hpp"

namespace dtrain::rdzv {

inline constexpr std::int64_t kMaxBarrierCount = 1000000;

template <class Waiter>
class StoreBarriers {
 public:
  // Enters `w`. When it completes the round, returns every waiter of the round (w last) and resets
  // the barrier; otherwise nullopt (w waits). Refused bad_request for a count out of range or one
  // that differs from the count the waiting callers gave.
  std::optional<std::vector<Waiter>> arrive(const std::string& name, std::int64_t count, Waiter w) {
    if (count < 1 || count > kMaxBarrierCount)
      throw Refused(wire::ErrorCode::bad_request, fmt::format("barrier '{}': count {} out of range", name, count));
    auto& b = rounds_[name];
    if (!b.waiting.empty() && b.count != count)
      throw Refused(wire::ErrorCode::bad_request,
                    fmt::format("barrier '{}': this caller expects {} but others expect {}", name, count, b.count));
    b.count = int(count);
    b.waiting.push_back(w);
    if (int(b.waiting.size()) < b.count) return std::nullopt;
    auto all = std::move(b.waiting);
    rounds_.erase(name);
    return all;
  }

  // Removes a waiter that gave up (timed out, disconnected); no-op when it is not waiting.
  void leave(const std::string& name, Waiter w) {
    auto it = rounds_.find(name);
    if (it == rounds_.end()) return;
    auto& v = it->second.waiting;
    v.erase(std::remove(v.begin(), v.end(), w), v.end());
    if (v.empty()) rounds_.erase(it);
  }

  // Callers waiting in the current round of `name`.
  int waiting(const std::string& name) const {
    auto it = rounds_.find(name);
    return it == rounds_.end() ? 0 : int(it->second.waiting.size());
  }

  // "barrier 'b': 2 of 3 arrived after 500 ms", said to a waiter whose timeout passed (before it leaves).
  std::string timeout_text(const std::string& name, std::int64_t ms) const {
    auto it = rounds_.find(name);
    int count = it == rounds_.end() ? 0 : it->second.count;
    return fmt::format("barrier '{}': {} of {} arrived after {} ms", name, waiting(name), count, ms);
  }

 private:
  struct Round {
    int count = 0;
    std::vector<Waiter> waiting;
  };
  std::unordered_map<std::string, Round> rounds_;
};

}  // namespace dtrain::rdzv
