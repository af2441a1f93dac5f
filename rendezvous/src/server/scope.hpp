#pragma once
// A scope is everything of one (run id, generation): its key-value table, store barriers, join
// barrier, events, exit barrier, and the connections waiting on each. Scopes of older generations
// of a run are freed once no connection uses them, so a restart never reads stale keys.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "event_log.hpp"
#include "exit_barrier.hpp"
#include "join_barrier.hpp"
#include "kv_table.hpp"
#include "store_barrier.hpp"
#include "wait_list.hpp"

namespace dtrain::rdzv::srv {

struct Scope {
  Scope(std::string run, std::int64_t gen, KvLimits limits);

  std::string run_id;
  std::int64_t generation = 0;
  int conns = 0;  // connections scoped here
  // store
  KvTable kv;
  std::unordered_map<std::string, Waiters> getters;  // parked GETs by key
  StoreBarriers<Conn*> barriers;
  // node coordination
  JoinBarrier join;
  Waiters joiners;  // parked in JOIN
  Clock::time_point last_progress = Clock::now();
  EventLog events;
  Waiters watchers;  // parked in WATCH
  ExitBarrier exit;
  Waiters leavers;  // parked in LEAVE
};

class Scopes {
 public:
  Scope& open(const std::string& run, std::int64_t gen, KvLimits limits);
  // Frees the generations of `run` older than its newest once no connection uses them.
  void collect(const std::string& run);
  // The latest generation of `run` that has nodes, or null.
  Scope* latest_with_nodes(const std::string& run);
  // Run ids with nodes in some generation, sorted.
  std::vector<std::string> runs_with_nodes() const;
  template <class F>
  void for_each(F&& fn) {
    for (auto& [k, s] : map_) fn(*s);
  }
  void clear() { map_.clear(); }

 private:
  std::map<std::pair<std::string, std::int64_t>, std::unique_ptr<Scope>> map_;
};

// Scopes a connection that finished its handshake (and frees older unused generations of its run).
void attach(Conn& c);
// Removes every reference its scope holds to c: its wait, its join before the barrier closed, and
// after it a node that closes without leaving is declared lost (unless the job is already ending).
void detach(Conn& c);

}  // namespace dtrain::rdzv::srv
