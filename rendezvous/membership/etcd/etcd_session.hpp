#pragma once
// EtcdSession: a node's membership (membership.hpp) with its records in etcd instead of a store that
// node 0 serves, so that any node, node 0 included, may be lost and the others go on. The keys are
// in etcd_records.hpp; the protocol, step by step, and who does it:
//   join     etcd_join.hpp: this node's request under its lease (lease.hpp); every joiner runs the
//            same pure join barrier over the requests it sees; the first whose barrier is ready
//            writes the generation's one table.
//   monitor  the lease kept alive every heartbeat_interval (lease.hpp), and a watch of g/<G>/
//            (generation_watch.hpp): event keys are job events; a table node's key deleted without
//            its done key is a lost node (etcd expired its lease); a failed keep-alive or a broken
//            watch is the rendezvous lost. Every event goes through JobEvents (job_events.hpp).
//   finish   g/<G>/done/<rank>, then wait for every table node's done key (done_keys.hpp) or the
//            fatal event that ends the wait, then revoke the lease.
// Every node sees the same keys in the same revision order, so every node names the same root cause.
// Threading and errors: as NodeSession (node_session.hpp).
#include <memory>
#include <mutex>

#include "client.hpp"
#include "done_keys.hpp"
#include "dtrain/rendezvous/membership/job_events.hpp"
#include "dtrain/rendezvous/membership/join_cancel.hpp"
#include "dtrain/rendezvous/membership/membership.hpp"
#include "etcd_join.hpp"
#include "etcd_records.hpp"
#include "generation_watch.hpp"
#include "lease.hpp"

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
  void set_figures(std::string, int) override {}  // each node reports its own ranks
  std::map<int, std::string> peer_figures() const override { return {}; }
  void report_failure(int rank, int exit_code, int signal, const std::string& message) override;
  void report_stop(int exit_code, int signal, const std::string& message) override;
  std::optional<rdzv::Event> finish(std::chrono::milliseconds timeout) override;
  std::optional<rdzv::Event> root_cause() const override;
  rdzv::JoinResult result() const override;

 private:
  void post_event(rdzv::Event e);
  EtcdJoined joined() const;
  std::string endpoint() const { return client_->endpoint(); }

  std::shared_ptr<Client> client_;
  rdzv::NodeSessionOptions opts_;
  Keys keys_;
  rdzv::JoinCancel cancel_;
  Lease lease_;
  rdzv::JobEvents events_;
  DoneKeys done_;
  GenerationWatch watch_;
  mutable std::mutex mu_;  // joined_ and event_count_: reports and result() come from other threads
  EtcdJoined joined_;
  std::int64_t event_count_ = 0;  // this node's event keys: <lease>-1, -2, ...
};

}  // namespace dtrain::etcd
