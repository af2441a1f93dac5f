#pragma once
// How the agent of one node meets the rest of the job: the events that come in from other nodes
// (Agent::post, from any thread) and the hooks through which local events go out (called on the
// agent's loop thread). The multi-node driver (multinode.hpp) connects the two to the rendezvous.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dtrain/agent/job_state.hpp"
#include "dtrain/agent/worker_exit.hpp"
#include "dtrain/config/plan.hpp"

namespace dtrain::agent {

// Events from outside the node (the multi-node session), posted from any thread.
struct Event {
  enum class Kind {
    go,            // generation `generation` may start (external_start)
    peer_failed,   // a worker on node `node_rank` failed: stop, then restart if budget is left
    node_lost,     // node `node_rank` went silent: stop and end with exit_code::node_lost
    restart,       // the job moves to generation `generation`: stop and start it
    membership,    // elastic: a node waits to join; restart into `generation` (counted, even past the budget)
    abort,         // stop and end with `exit_code`
  };
  Kind kind = Kind::abort;
  int generation = 0;
  int node_rank = -1;
  int exit_code = 0;
  std::string reason;
  int master_port = 0;  // go: MASTER_PORT of this generation (from the rank table); 0: keep
  // go of an elastic job: this generation's plan (node rank, world size, ranks, batch); null: keep
  std::shared_ptr<const config::Plan> plan{};
  static Event go(int g, int port = 0, std::shared_ptr<const config::Plan> plan = nullptr) {
    return {Kind::go, g, -1, 0, {}, port, std::move(plan)};
  }
};

// Why this node stops its job on its own (no failure of its own workers, no event from elsewhere).
struct SelfStop {
  int signal = 0;       // SIGINT, SIGTERM, SIGHUP; 0 for the others
  int exit_code = 0;    // what this node ends with (130, 143, 124, 70, ...)
  std::string reason;   // "interrupted by SIGINT", "max_runtime_s 5 passed", "hang: ..."
};

// Called on the loop thread: how local events leave the node.
struct AgentHooks {
  std::function<void(JobState, int generation)> on_state;
  // The first local failure of a generation, with the last lines of its stderr (called once that
  // worker's output is read, or a short while after its exit at the latest).
  std::function<void(const WorkerExit&, int generation)> on_local_failure;
  // This node stops on its own (a signal, max_runtime_s, a hang): called before `stopping`.
  std::function<void(const SelfStop&, int generation)> on_self_stop;
  // Every second while workers run: where each local rank is (hang.hpp's lines, and a "stuck: ..."
  // line past the threshold), when some worker uses the collectives library.
  std::function<void(const std::string& text)> on_progress;
  // Several nodes: this node's figures for the straggler report (every second while workers run),
  // and the other nodes' as last received, by node rank (progress_watch.hpp).
  std::function<void(const std::string& text)> on_figures;
  std::function<std::map<int, std::string>()> peer_figures;
  // Where this node's ranks keep their files (the run folder: progress pages, stacks files) and
  // which ranks are this node's: before the first generation starts, and again when an elastic
  // job's plan changes.
  std::function<void(const std::string& run_dir, const std::vector<int>& local_ranks)> on_ranks;
};

}  // namespace dtrain::agent
