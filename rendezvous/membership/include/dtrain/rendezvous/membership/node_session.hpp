#pragma once
// NodeSession: one agent's membership in a multi-node job, driven by the agent.
//
//   NodeSession s(opts);                       // nothing happens yet
//   JoinResult r = s.join(progress);           // blocks until `instances` nodes joined (or throws);
//                                              // connecting is retried for up to join_timeout
//   s.start_monitoring(on_event);              // heartbeat + watcher threads
//   ... spawn workers with r (ranks, MASTER_ADDR/PORT) ...
//   s.set_local_state("running", n, 0, restarts);   // any thread; carried by the next heartbeat
//   on a local worker failure: s.report_failure(rank, code, sig, last_lines);
//   on_event(e) fires on EVERY node (the reporter included) for the failure or a lost node:
//     stop workers; then either s.rejoin(generation + 1, progress) or exit with e as root cause.
//   on success: s.finish(timeout);             // exit barrier: returns once every node finished,
//                                              // or the failure that ended the wait early
//
// Protocol (server side in rendezvous/server, docs/wire-protocol.md): the join (src/node_join.cpp)
// uses its own connection, which stays the node's session (heartbeats, reports, exit barrier); a
// second connection blocks in `watch` (event_watch.hpp) so a job event reaches every agent at once;
// with a stacks source, a third blocks for `dtrain status --stacks` requests (stacks_desk.hpp).
// An agent whose session connection closes without finishing, or that misses heartbeats
// (heartbeat.hpp) for heartbeat_timeout, is declared lost by the server and every agent's watcher
// wakes with a "lost" event. If this agent loses the server itself, it gets a synthetic "lost" event
// with node -1 naming the rendezvous. The watcher keeps running through the exit barrier, so a
// failure or a loss elsewhere ends the wait at once. Every event goes through JobEvents
// (job_events.hpp), which delivers it once and keeps the root cause.
//
// Threading: join(), rejoin(), finish() and the destructor belong to one controlling thread (the
// agent's). report_failure(), set_local_state(), root_cause(), result() are thread-safe, and so is
// cancel_join(), which exists to break a join from another thread. Callbacks: `progress` runs on the
// thread that called join()/rejoin(); `on_event` runs on the session's watcher thread, at most once
// per event, never while an internal lock is held: hand it to the controlling thread (a queue, or
// uv_async_send into a libuv loop). Do not call join()/rejoin()/finish() or destroy the session from
// inside a callback.
//
// Errors: join/rejoin throw TimeoutError (barrier not complete; the message names missing node ranks
// and the hosts that joined), JoinError (duplicate node rank, too many nodes, spec mismatch),
// AuthError, IoError, Cancelled (cancel_join()). finish() throws NodeLostError when a node or the
// rendezvous was lost before every node finished, TimeoutError naming the nodes that never finished.
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "dtrain/rendezvous/membership/event_watch.hpp"
#include "dtrain/rendezvous/membership/heartbeat.hpp"
#include "dtrain/rendezvous/membership/job_events.hpp"
#include "dtrain/rendezvous/membership/join_cancel.hpp"
#include "dtrain/rendezvous/membership/membership.hpp"
#include "dtrain/rendezvous/store/client.hpp"

namespace dtrain::rdzv {

class NodeSession final : public Membership {
 public:
  explicit NodeSession(NodeSessionOptions opts);
  ~NodeSession() override;  // stops the threads and closes the connections (no exit barrier)
  NodeSession(const NodeSession&) = delete;
  NodeSession& operator=(const NodeSession&) = delete;

  JoinResult join(const ProgressFn& progress = {}) override;
  // Stops monitoring, then joins again under `generation` (g+1 after a failure) as the same node
  // rank, with a fresh MASTER_PORT proposal: keys of the old generation are invisible to the new one.
  JoinResult rejoin(int generation, const ProgressFn& progress = {}) override;
  // Any thread: the join or rejoin in progress, and every later one, throws Cancelled promptly
  // (while connecting, in the handshake or in the barrier). An established membership is untouched:
  // report_failure() and finish() still work. For an agent that stopped while waiting for the others.
  void cancel_join() override;
  // Heartbeats every heartbeat_interval and watches job events; on_event as described above.
  void start_monitoring(EventFn on_event) override;
  void stop_monitoring() override;

  void set_local_state(std::string state, int running, int exited, int restarts) override;
  // Where this node's workers are (the agent's hang diagnosis, one line per rank): stored with the
  // next heartbeat under progress_key(node rank) (run_status.hpp) in this generation's keys.
  void set_progress(std::string text) override;
  // Sent and read back with the heartbeats (heartbeat.hpp).
  void set_figures(std::string text, int nodes) override { heartbeat_.set_figures(std::move(text), nodes); }
  std::map<int, std::string> peer_figures() const override { return heartbeat_.peer_figures(); }
  // Answered from start_monitoring() to stop_monitoring() (the exit barrier included).
  void set_stacks_source(StacksSource source) override { stacks_source_ = std::move(source); }
  // Reports a failed worker; every agent (this one too) then sees a "failure" event.
  void report_failure(int rank, int exit_code, int signal, const std::string& message) override;
  // Reports that this node stops on its own (a signal, a time limit, a hang) with `exit_code`;
  // every agent sees a "stopped" event whose message is `message` ("interrupted (SIGINT)").
  void report_stop(int exit_code, int signal, const std::string& message) override;
  // Exit barrier, after this node's work succeeded. Returns nullopt once every node finished (the
  // node is "done": its disconnect is not a loss). Returns the failure event when another node's
  // failure ends the wait (or had already happened in this generation: the barrier cannot complete).
  // Throws NodeLostError for a lost node or rendezvous, TimeoutError naming the nodes that never
  // finished. Heartbeats stop at once; monitoring stops before it returns.
  std::optional<Event> finish(std::chrono::milliseconds timeout) override;

  // The first fatal event seen by this session in the current generation.
  std::optional<Event> root_cause() const override;
  JoinResult result() const override;
  // A store connection in this node's (run id, generation) scope, e.g. for the agent's own keys.
  TcpStore& store();

 private:
  std::optional<Event> leave(std::chrono::milliseconds timeout);
  void report(int rank, int exit_code, int signal, const std::string& message, const char* kind);
  void close_all();

  NodeSessionOptions opts_;
  JoinCancel cancel_;
  JobEvents events_;
  Heartbeat heartbeat_;
  EventWatch watch_;
  StacksDesk desk_;
  StacksSource stacks_source_;
  mutable std::mutex mu_;  // session_ and result_: report() and result() come from other threads
  std::unique_ptr<TcpStore> session_;
  JoinResult result_;
};

}  // namespace dtrain::rdzv
