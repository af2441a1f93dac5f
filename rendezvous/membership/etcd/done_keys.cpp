// DoneKeys (done_keys.hpp): which nodes of a generation finished.
#include "done_keys.hpp"

#include <fmt/format.h>

namespace dtrain::etcd {

void DoneKeys::reset(std::vector<std::pair<int, std::string>> nodes) {
  std::lock_guard lock(mu_);
  nodes_ = std::move(nodes);
  done_.clear();
  woken_ = false;
}

void DoneKeys::mark(int node_rank) {
  {
    std::lock_guard lock(mu_);
    done_.insert(node_rank);
  }
  cv_.notify_all();
}

bool DoneKeys::done(int node_rank) const {
  std::lock_guard lock(mu_);
  return done_.count(node_rank) != 0;
}

void DoneKeys::wake() {
  {
    std::lock_guard lock(mu_);
    woken_ = true;
  }
  cv_.notify_all();
}

bool DoneKeys::all_done() const {
  for (const auto& n : nodes_)
    if (done_.count(n.first) == 0) return false;
  return true;
}

void DoneKeys::wait(std::chrono::milliseconds t) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, t, [&] { return woken_ || all_done(); });
}

std::vector<std::string> DoneKeys::missing() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& [rank, host] : nodes_)
    if (done_.count(rank) == 0) out.push_back(fmt::format("node {} ({})", rank, host));
  return out;
}

}  // namespace dtrain::etcd
