#pragma once
// StacksDesk: the built-in session's answer to `dtrain status --stacks --rdzv` (run_status.hpp's
// query_stacks). A connection of its own blocks in GET on the next request key of this generation
// ("dtrain/stacks/ask-K"); when one appears it asks `source` for this node's stacks (the agent's
// dump, which may take a couple of seconds: never on the agent's loop) and stores the text under
// each pending request's answer key for this node. Requests that came while it dumped are answered
// with the same dump. A broken connection ends the thread quietly: the heartbeat and the watcher
// are the ones that report a lost rendezvous.
//
// Threading: start() and stop() belong to the session's controlling thread; `source` runs on the
// desk's thread.
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "dtrain/rendezvous/store/client.hpp"

namespace dtrain::rdzv {

using StacksSource = std::function<std::string()>;

class StacksDesk {
 public:
  StacksDesk() = default;
  ~StacksDesk() { stop(); }
  StacksDesk(const StacksDesk&) = delete;
  StacksDesk& operator=(const StacksDesk&) = delete;

  // Connects in `co`'s (run id, generation) scope (connect_store's errors) and answers as node
  // `node_rank` from then on.
  void start(const ClientOptions& co, int node_rank, StacksSource source);
  // Idempotent: closes the connection (a GET in flight ends) and joins the thread (after a dump in
  // progress).
  void stop();

 private:
  void loop();

  std::unique_ptr<TcpStore> conn_;
  int node_rank_ = -1;
  StacksSource source_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace dtrain::rdzv
