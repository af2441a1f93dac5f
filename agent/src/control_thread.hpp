#pragma once
// ControlThread: the one thread of the multi-node driver. It owns the Membership (NodeSession, or the etcd backend's session), takes the inputs
// of the SessionBridge (session_bridge.hpp) from one queue, in arrival order, and performs the
// actions the bridge returns. Producers never block: the agent's hooks (its loop thread), the
// session's job events (its watcher thread) and the end of Agent::run() (the main thread) only
// enqueue. Everything that waits on the rendezvous (reports, re-joins, the exit barrier) runs here;
// a re-join that the agent's end makes moot is broken with NodeSession::cancel_join().
//
//   ControlThread ct(std::move(session), cfg, first_join, base_plan, progress_mode, stderr_fd);
//   Agent agent(options, ct.hooks());
//   ct.start([&agent](Event e) { agent.post(std::move(e)); });
//   ct.agent_done(agent.run(), agent.result().reason);
//   return ct.wait();   // the node's exit status; the thread is joined
// The Agent (what `post` reaches) must outlive wait(). When constructing or running it throws, agent_failed() still
// tells the other nodes (as rank -1) before the error goes on.
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "dtrain/agent/events.hpp"
#include "dtrain/rendezvous/membership/node_session.hpp"
#include "join_line.hpp"
#include "node_config.hpp"
#include "session_bridge.hpp"

namespace dtrain::agent {

class ControlThread {
 public:
  // `session` has joined its first generation as `first`; `base` is the plan before that join (an
  // elastic job's generations are planned from it).
  ControlThread(std::unique_ptr<rdzv::Membership> session, const NodeConfig& cfg, const rdzv::JoinResult& first,
                config::Plan base, int progress_mode, int stderr_fd);
  ~ControlThread();  // a thread still running is told the agent ended (status 125) and joined
  ControlThread(const ControlThread&) = delete;
  ControlThread& operator=(const ControlThread&) = delete;

  // The Agent's hooks: they enqueue its state changes and local failures.
  AgentHooks hooks();
  // How events reach the Agent (Agent::post; thread-safe).
  using Post = std::function<void(Event)>;
  // Starts the thread: monitoring of generation 0, then the go through `post` (empty: no agent).
  void start(Post post);
  // Agent::run() returned `code`. Any thread, once.
  void agent_done(int code, std::string reason);
  // Constructing or running the Agent threw `e`: starts the thread if need be, then agent_done()
  // with the error's exit status and text.
  void agent_failed(const std::exception& e);
  // Joins the thread; this node's exit status.
  int wait();
  // After wait(): the failure every node named as the root cause (nullopt: none was needed).
  const std::optional<rdzv::Event>& root_cause() const { return root_; }

 private:
  void push(bridge::Input in);
  std::optional<bridge::Input> pop();
  void loop();
  std::optional<bridge::Input> perform(const bridge::Action& a);
  std::optional<bridge::Input> start_monitoring(int generation);
  std::optional<bridge::Input> rejoin(int generation);
  std::optional<bridge::Input> exit_barrier(std::chrono::milliseconds limit);
  void report(const bridge::Report& r);
  void report_stop(const bridge::ReportStop& r);
  void end(const bridge::End& e);

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<bridge::Input> inbox_;  // under mu_
  bool done_posted_ = false;         // under mu_: agent_done() was called

  // the control thread's own (after start()):
  std::unique_ptr<rdzv::Membership> session_;
  bridge::SessionBridge machine_;
  rdzv::JoinResult first_;
  config::Plan base_;
  std::string endpoint_;
  JoinLine line_;
  int stderr_fd_;
  Post post_;
  int status_ = 125;
  std::optional<rdzv::Event> root_;
  std::optional<std::chrono::steady_clock::time_point> settle_until_;  // Settle: SettleOver then

  // where the agent's ranks are (its on_ranks hook), for `dtrain status --stacks --rdzv`: the
  // session's stacks desk dumps them on a thread of its own, never on the agent's loop
  struct Ranks {
    std::mutex mu;
    std::string run_dir;     // "" until the agent set up its run folder
    std::vector<int> local;
  };
  std::shared_ptr<Ranks> ranks_ = std::make_shared<Ranks>();
  std::thread thread_;
};

}  // namespace dtrain::agent
