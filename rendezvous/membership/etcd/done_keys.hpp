#pragma once
// DoneKeys: the etcd session's exit barrier state for one generation: the nodes of the rank table
// and which of them wrote their done key (g/<G>/done/<rank>). finish() waits until every node is
// done, or a fatal event ends the wait (wake()); the watch marks nodes done as their keys appear.
// Thread-safe.
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace dtrain::etcd {

class DoneKeys {
 public:
  // A new generation: its nodes (node rank, host), none done, not woken.
  void reset(std::vector<std::pair<int, std::string>> nodes);
  void mark(int node_rank);
  bool done(int node_rank) const;
  // Ends a wait (now or to come) at once: a fatal event came.
  void wake();
  // Until every node is done, wake(), or `t` passed.
  void wait(std::chrono::milliseconds t);
  // The nodes not done, as "node 1 (h1)", in rank order.
  std::vector<std::string> missing() const;

 private:
  bool all_done() const;  // under mu_

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<int, std::string>> nodes_;
  std::set<int> done_;
  bool woken_ = false;
};

}  // namespace dtrain::etcd
