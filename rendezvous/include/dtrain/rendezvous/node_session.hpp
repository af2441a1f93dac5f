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
// Protocol (server side in server.cpp, docs/wire-protocol.md): the join uses its own connection,
// which stays the node's session (heartbeats, reports, exit barrier); a second connection blocks in
// `watch` so a job event reaches every agent at once. An agent whose session connection closes
// without finishing, or that misses heartbeats for heartbeat_timeout, is declared lost by the server
// and every agent's watcher wakes with a "lost" event. If this agent loses the server itself, it gets
// a synthetic "lost" event with node -1 naming the rendezvous. The watcher keeps running through the
// exit barrier, so a failure or a loss elsewhere ends the wait at once (watch_loop is the only place
// that waits for job events).
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
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dtrain/rendezvous/client.hpp"
#include "dtrain/rendezvous/records.hpp"

namespace dtrain::rdzv {

struct NodeSessionOptions {
  ClientOptions store;            // endpoint, token, run id, generation of the first join
  std::string host;               // this node's host name (shown in tables and errors)
  int node_rank = -1;             // from discovery; -1: the server assigns one
  int slots = 1;                  // local workers
  int instances = 1;              // nodes the job expects (an elastic job: at most)
  int min_instances = 0;          // elastic: at least (0: exactly `instances`); node ranks are then
                                  // assigned densely by the rendezvous and node_rank is a preference
  std::chrono::milliseconds last_call{30000};  // elastic: the barrier closes this long after min joined
  std::string spec_hash;          // every node must present the same (command, cluster, ...)
  int master_port = 0;            // MASTER_PORT proposed if this node becomes node 0; 0: a free port
  std::string advertise_addr;     // MASTER_ADDR if node 0; empty: our address on the store connection
  std::chrono::milliseconds join_timeout{600000};
  std::chrono::milliseconds heartbeat_interval{5000};
  std::chrono::milliseconds heartbeat_timeout{15000};  // 0: never declare a node lost for silence
  bool fetch_table = true;        // also fetch the full rank table after the barrier (N rows per
                                  // node: turn off for thousands of nodes if only `self` is needed)
};

struct JoinResult {
  JoinReply self;                 // node rank, world size, rank offset, MASTER_ADDR/PORT
  std::vector<NodeEntry> table;   // every node by rank (when fetch_table)
  int generation = 0;
  std::string local_address;      // our IP toward the store (DTRAIN_LOCAL_ADDR)
};

struct JoinProgress {
  bool reachable = true;          // false: the rendezvous does not answer yet (node 0 not up)
  std::string endpoint;           // "host:port" of the rendezvous
  std::string why;                // !reachable: the last connect error
  int joined = 0;
  int instances = 0;
  std::string missing;            // "node 2", "1 more node(s)", ...
  std::chrono::milliseconds elapsed{0};
  std::chrono::milliseconds timeout{0};
  // "waiting for nodes 2/3 (missing: node 2) 12 s / 600 s", or
  // "waiting for the rendezvous at 10.0.0.1:29400 (not reachable yet) 12 s / 600 s"
  std::string line() const;
};

using ProgressFn = std::function<void(const JoinProgress&)>;
using EventFn = std::function<void(const Event&)>;

// A node of the job (node >= 0, its host name in `host`) or the rendezvous itself (node -1, its
// endpoint in `host`) was lost: an agent went silent or its connection closed without finishing.
// The exit status of a lost node is exit_code::node_lost.
class NodeLostError : public IoError {
 public:
  NodeLostError(int node_rank, std::string host_name, const std::string& what)
      : IoError(what), node(node_rank), host(std::move(host_name)) {}
  int node;
  std::string host;
};

class NodeSession {
 public:
  explicit NodeSession(NodeSessionOptions opts);
  ~NodeSession();  // stops the threads and closes the connections (no exit barrier)
  NodeSession(const NodeSession&) = delete;
  NodeSession& operator=(const NodeSession&) = delete;

  JoinResult join(const ProgressFn& progress = {});
  // Stops monitoring, then joins again under `generation` (g+1 after a failure) as the same node
  // rank, with a fresh MASTER_PORT proposal: keys of the old generation are invisible to the new one.
  JoinResult rejoin(int generation, const ProgressFn& progress = {});
  // Any thread: the join or rejoin in progress, and every later one, throws Cancelled promptly
  // (while connecting, in the handshake or in the barrier). An established membership is untouched:
  // report_failure() and finish() still work. For an agent that stopped while waiting for the others.
  void cancel_join();
  // Heartbeats every heartbeat_interval and watches job events; on_event as described above.
  void start_monitoring(EventFn on_event);
  void stop_monitoring();

  void set_local_state(std::string state, int running, int exited, int restarts);
  // Where this node's workers are (the agent's hang diagnosis, one line per rank): stored with the
  // next heartbeat under progress_key(node rank) in this generation's keys, for `dtrain status`.
  void set_progress(std::string text);
  static std::string progress_key(int node_rank);
  // Reports a failed worker; every agent (this one too) then sees a "failure" event.
  void report_failure(int rank, int exit_code, int signal, const std::string& message);
  // Reports that this node stops on its own (a signal, a time limit, a hang) with `exit_code`;
  // every agent sees a "stopped" event whose message is `message` ("interrupted (SIGINT)").
  void report_stop(int exit_code, int signal, const std::string& message);
  // Exit barrier, after this node's work succeeded. Returns nullopt once every node finished (the
  // node is "done": its disconnect is not a loss). Returns the failure event when another node's
  // failure ends the wait (or had already happened in this generation: the barrier cannot complete).
  // Throws NodeLostError for a lost node or rendezvous, TimeoutError naming the nodes that never
  // finished. Heartbeats stop at once; monitoring stops before it returns.
  std::optional<Event> finish(std::chrono::milliseconds timeout);

  // The first fatal event seen by this session in the current generation.
  std::optional<Event> root_cause() const;
  JoinResult result() const;
  // A store connection in this node's (run id, generation) scope, e.g. for the agent's own keys.
  TcpStore& store();

 private:
  std::unique_ptr<TcpStore> connect_for_join(const ClientOptions& co);
  JoinResult join_once(const ClientOptions& co, const ProgressFn& progress, std::unique_ptr<TcpStore>& conn);
  JoinResult run_join(TcpStore& conn, const ProgressFn& progress);
  std::optional<Event> leave(std::chrono::milliseconds timeout);
  void report(int rank, int exit_code, int signal, const std::string& message, const char* kind);
  void stop_heartbeats();
  void heartbeat_loop();
  void watch_loop();
  void emit(const Event& e);
  void close_all();

  NodeSessionOptions opts_;
  std::shared_ptr<Canceller> join_cancel_;
  std::unique_ptr<TcpStore> session_;
  std::unique_ptr<TcpStore> watcher_;
  std::thread hb_thread_, watch_thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  // under mu_:
  bool hb_stop_ = false, watch_stop_ = false;
  bool watch_ended_ = false;     // the watcher lost its connection
  bool finished_ = false;        // in or past the exit barrier: losing the server is expected
  bool in_barrier_ = false;      // finish() waits: a fatal event breaks the wait
  TcpStore* joining_ = nullptr;  // the connection of a join in progress (cancel_join closes it)
  bool join_cancelled_ = false;
  std::string state_ = "joined";
  int running_ = 0, exited_ = 0, restarts_ = 0;
  std::optional<std::string> progress_;  // not yet stored
  JoinResult result_;
  std::optional<Event> root_;
  std::int64_t last_seq_ = 0;
  bool server_lost_emitted_ = false;
  EventFn on_event_;
  std::mutex emit_mu_;
};

// `dtrain status`: the run ids the server knows (with at least one joined node).
std::vector<std::string> list_runs(const ClientOptions& opts);
// The node table of `run_id` (latest generation).
RunStatus query_status(const ClientOptions& opts, const std::string& run_id);
// What each node of `st` last published with set_progress() ("" when nothing), in the order of st.nodes.
std::vector<std::string> query_progress(const ClientOptions& opts, const RunStatus& st);

}  // namespace dtrain::rdzv
