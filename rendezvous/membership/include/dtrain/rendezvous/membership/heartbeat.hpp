#pragma once
// Heartbeat: the built-in session's heartbeat thread. Every interval it sends HEARTBEAT on the
// node's session connection with what the agent last said of this node (its state and worker
// counts, as `dtrain status` shows them), and stores the agent's latest progress lines under
// progress_key(node) (run_status.hpp) once after each change; likewise the agent's figures for the
// other nodes (its ranks' time in the collectives, for the straggler report) under
// figures_key(node), and it reads the other nodes' figures back (at most kFiguresPerBeat nodes a
// heartbeat, in turn: a bounded load on the rendezvous however many nodes). A heartbeat that fails
// is the rendezvous lost: `on_lost` runs once, with why, and the thread ends.
//
// Threading: start() and stop() belong to the session's controlling thread; set_state() and
// set_progress(), set_figures() and peer_figures() are thread-safe. What was set survives a stop() and a later start() (a rejoin).
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "dtrain/rendezvous/store/client.hpp"

namespace dtrain::rdzv {

class Heartbeat {
 public:
  // `reply_timeout`: how long a heartbeat's reply may take before the rendezvous counts as lost (a
  // node cut off from it hears nothing at all: no error, only silence).
  Heartbeat(std::chrono::milliseconds interval, std::chrono::milliseconds reply_timeout)
      : interval_(interval), reply_timeout_(reply_timeout) {}
  ~Heartbeat() { stop(); }
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // `session` (the node's joined connection) must outlive the thread (stop()).
  void start(TcpStore& session, int node_rank, std::function<void(const std::string& why)> on_lost);
  void stop();  // idempotent; the heartbeat in flight completes first

  void set_state(std::string state, int running, int exited, int restarts);
  void set_progress(std::string text);
  // This node's figures (opaque here); `nodes`: the job's node count (the others' are read back).
  void set_figures(std::string text, int nodes);
  // What the other nodes last published, by node rank.
  std::map<int, std::string> peer_figures() const;
  static constexpr int kFiguresPerBeat = 16;

 private:
  void loop(TcpStore& session, int node_rank, const std::function<void(const std::string&)>& on_lost);
  void exchange_figures(TcpStore& session, int node_rank, std::optional<std::string> mine, int nodes);

  const std::chrono::milliseconds interval_;
  const std::chrono::milliseconds reply_timeout_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  // what the next heartbeat carries
  std::string state_ = "joined";
  int running_ = 0, exited_ = 0, restarts_ = 0;
  std::optional<std::string> progress_;  // not yet stored
  std::optional<std::string> figures_;   // not yet stored
  int nodes_ = 1;
  int next_peer_ = 0;                     // the node whose figures are read next
  std::map<int, std::string> peers_;
  std::thread thread_;
};

}  // namespace dtrain::rdzv
