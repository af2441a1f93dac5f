#pragma once
// GenerationWatch: the etcd session's watch of its generation's keys (g/<G>/, etcd_records.hpp),
// from just after the revision of the table that closed the join barrier, on a thread of its own:
//   an event key         a job event, to JobEvents (etcd's revision is its seq)
//   a done key           that node finished (DoneKeys)
//   a node key deleted   while the node is not done: a lost node (its lease ended: the agent
//                        stopped renewing it for the heartbeat timeout), to JobEvents
// A broken watch is the rendezvous lost (to JobEvents), and the thread ends.
//
// Threading: start() and stop() belong to the session's controlling thread.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "client.hpp"
#include "done_keys.hpp"
#include "dtrain/rendezvous/membership/job_events.hpp"
#include "etcd_records.hpp"

namespace dtrain::etcd {

class GenerationWatch {
 public:
  GenerationWatch(Client& client, const Keys& keys, rdzv::JobEvents& events, DoneKeys& done)
      : client_(client), keys_(keys), events_(events), done_(done) {}
  ~GenerationWatch() { stop(); }
  GenerationWatch(const GenerationWatch&) = delete;
  GenerationWatch& operator=(const GenerationWatch&) = delete;

  // Watches generation g, whose table `t` was written at revision `table_revision` (etcd's errors).
  void start(const Table& t, std::int64_t g, std::int64_t table_revision, std::chrono::milliseconds heartbeat_timeout);
  void stop();  // idempotent: closes the watch and joins the thread

 private:
  void loop();
  void on_events(const std::vector<WatchEvent>& evs);
  void node_gone(const std::string& key, std::int64_t revision);

  Client& client_;
  const Keys& keys_;
  rdzv::JobEvents& events_;
  DoneKeys& done_;
  // what the thread reads, set by start()
  Table table_;
  std::int64_t generation_ = 0;
  std::chrono::milliseconds heartbeat_timeout_{0};
  std::unique_ptr<Watch> watch_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace dtrain::etcd
