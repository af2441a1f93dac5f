#pragma once
// EtcdSession: a node's membership (membership.hpp) with its records in etcd instead of a store that
// node 0 serves, so that any node, node 0 included, may be lost and the others go on. The keys are
// in etcd_records.hpp; the protocol, step by step:
//   join     a lease (TTL = heartbeat_timeout) holds this node's join request under g/<G>/node/.
//            Every joiner feeds the requests it sees (etcd revision order) into the same pure join
//            barrier the built-in rendezvous runs (membership/join_barrier.hpp); the first whose barrier
//            is ready writes g/<G>/table in a transaction that succeeds only while there is none,
//            and every node takes its row from that table. A generation that already has a table
//            is running: a fixed job refuses the joiner; an elastic one with room ends it with a
//            "joined" event and the joiner (then every node) meets again in G+1.
//   monitor  a keep-alive of the lease every heartbeat_interval, and a watch of g/<G>/: event keys
//            are job events; a table node's key deleted without its done key is a lost node (etcd
//            expired its lease); a failed keep-alive or a broken watch is the rendezvous lost.
//   finish   g/<G>/done/<rank>, then wait for every table node's done key (or the fatal event that
//            ends the wait), then revoke the lease.
// Every node sees the same keys in the same revision order, so every node names the same root cause.
// Threading and errors: as NodeSession (node_session.hpp).
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "client.hpp"
#include "dtrain/rendezvous/membership/membership.hpp"
#include "etcd_records.hpp"

namespace dtrain::etcd {

class EtcdSession final : public rdzv::Membership {
 public:
  // opts.store names the run id and first generation (host/port/token are not used: `client` is).
  EtcdSession(std::shared_ptr<Client> client, rdzv::NodeSessionOptions opts);
  ~EtcdSession() override;
  EtcdSession(const EtcdSession&) = delete;
  EtcdSession& operator=(const EtcdSession&) = delete;

  rdzv::JoinResult join(const rdzv::ProgressFn& progress = {}) override;
  rdzv::JoinResult rejoin(int generation, const rdzv::ProgressFn& progress = {}) override;
  void cancel_join() override;
  void start_monitoring(rdzv::EventFn on_event) override;
  void stop_monitoring() override;
  // `dtrain status` reads the built-in rendezvous only: nothing to publish here
  void set_local_state(std::string, int, int, int) override {}
  void set_progress(std::string) override {}
  void report_failure(int rank, int exit_code, int signal, const std::string& message) override;
  void report_stop(int exit_code, int signal, const std::string& message) override;
  std::optional<rdzv::Event> finish(std::chrono::milliseconds timeout) override;
  std::optional<rdzv::Event> root_cause() const override;
  rdzv::JoinResult result() const override;

 private:
  friend class JoinRun;  // etcd_join.cpp: one join barrier
  rdzv::JoinResult run_join(std::int64_t generation, const rdzv::ProgressFn& progress);  // etcd_join.cpp
  std::int64_t target_generation(std::int64_t wanted);
  void raise_generation(std::int64_t to);
  void start_lease();
  void end_lease();
  void keeper_loop();
  void watch_loop(std::shared_ptr<Watch> w);
  void on_watch_events(const std::vector<WatchEvent>& evs);
  void post_event(rdzv::Event e);
  void emit(const rdzv::Event& e);
  void lost_rendezvous(const std::string& why);
  std::string endpoint() const { return client_->endpoint(); }

  std::shared_ptr<Client> client_;
  rdzv::NodeSessionOptions opts_;
  Keys keys_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  // under mu_:
  std::int64_t lease_ = 0;
  bool keeper_stop_ = false;
  bool monitoring_ = false;
  bool join_cancelled_ = false;
  std::shared_ptr<Watch> joining_watch_;  // the watch of a join in progress (cancel_join closes it)
  std::shared_ptr<Watch> watch_;          // the monitoring watch
  Table table_;
  rdzv::JoinResult result_;
  std::int64_t table_revision_ = 0;
  std::set<int> done_;                    // node ranks whose done key exists
  std::optional<rdzv::Event> root_;
  std::int64_t last_seq_ = 0;
  bool lost_emitted_ = false;
  std::int64_t event_count_ = 0;
  rdzv::EventFn on_event_;
  std::thread keeper_, watcher_;
  std::mutex emit_mu_;
};

}  // namespace dtrain::etcd
