#pragma once
// A scope is everything of one (run id, generation): its key-value table, store barriers, join
// barrier, events, exit barrier, and the connections waiting on each. Scopes of older generations
// of a run are freed once no connection uses them, so a restart never reads stale keys; the newest
// one too once no connection uses it and its job ran (its join barrier closed) or it holds nothing,
// so a long-lived server forgets finished runs and the same job can run again. Keys, values and
// event texts are charged to the run's budget (all its generations) and the server's (all runs).
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "event_log.hpp"
#include "exit_barrier.hpp"
#include "dtrain/rendezvous/membership/join_barrier.hpp"
#include "dtrain/rendezvous/store/kv_table.hpp"
#include "dtrain/rendezvous/store/store_barrier.hpp"
#include "wait_list.hpp"

namespace dtrain::rdzv::srv {

// Failure reports kept per scope; later REPORTs are refused (the first one is the root cause).
inline constexpr std::size_t kMaxEventsPerScope = 10000;

struct Scope {
  Scope(std::string run, std::int64_t gen, KvLimits limits, Budget* run_budget);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

  // Charges an event's text to the run's budget (Refused limit past it or past kMaxEventsPerScope).
  void charge_event(std::size_t bytes);
  // Nothing more can happen here: no connection uses it, and its job ran or it holds nothing.
  bool disposable() const;

  std::string run_id;
  std::int64_t generation = 0;
  Budget* budget;  // the run's, outlives the scope
  std::size_t event_bytes = 0;
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
  // Limits of one run (every generation, and each generation's own table) and of all runs.
  Scopes(KvLimits per_run, KvLimits total);
  Scope& open(const std::string& run, std::int64_t gen);
  // Frees the generations of `run` older than its newest once no connection uses them, and any
  // generation that is disposable().
  void collect(const std::string& run);
  // The latest generation of `run` that has nodes, or null.
  Scope* latest_with_nodes(const std::string& run);
  // Run ids with nodes in some generation, sorted.
  std::vector<std::string> runs_with_nodes() const;
  template <class F>
  void for_each(F&& fn) {
    for (auto& [k, s] : map_) fn(*s);
  }
  void clear() {
    map_.clear();
    runs_.clear();
  }
  std::size_t size() const { return map_.size(); }
  const Budget& total() const { return total_; }

 private:
  struct Run {
    std::unique_ptr<Budget> budget;
    int scopes = 0;
  };
  KvLimits per_run_;
  Budget total_;
  std::map<std::string, Run> runs_;  // declared before map_: scopes go first
  std::map<std::pair<std::string, std::int64_t>, std::unique_ptr<Scope>> map_;
};

// Scopes a connection that finished its handshake (and frees older unused generations of its run).
void attach(Conn& c);
// Removes every reference its scope holds to c: its wait, its join before the barrier closed, and
// after it a node that closes without leaving is declared lost (unless the job is already ending).
void detach(Conn& c);

}  // namespace dtrain::rdzv::srv
