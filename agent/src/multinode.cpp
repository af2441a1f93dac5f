// The multi-node driver (multinode.hpp), orchestration only. The parts, one file each:
//   node_config.cpp     the job's multi-node settings, spec hash, rank table -> this node's plan
//   node_role.cpp       serve the rendezvous or join it (bind probe)
//   join_line.cpp       the join barrier's waiting line and error wording
//   session_bridge.cpp  the pure state machine: job events <-> agent events, restarts, exit barrier
//   control_thread.cpp  the one thread that runs the bridge and owns the NodeSession
// Threads: the caller's (Agent::run's libuv loop), the control thread, and the NodeSession's own
// heartbeat and watcher threads; all are joined before run_multinode() returns or throws.
#include "dtrain/agent/multinode.hpp"

#include <optional>

#include "control_thread.hpp"
#include "dtrain/agent/agent.hpp"
#include "dtrain/common/errors.hpp"
#include "dtrain/common/exit_codes.hpp"
#include "dtrain/common/log.hpp"
#include "dtrain/rendezvous/store/auth.hpp"
#include "join_line.hpp"
#include "node_config.hpp"
#include "node_role.hpp"
#include "session_bridge.hpp"

namespace dtrain::agent {

namespace {

// The summary once the nodes agreed (or the success line after the exit barrier). A node whose own
// workers finished and whose job failed later has said so already (the bridge's End message): its
// summary goes to the JSON only.
void report_end(AgentResult r, const std::optional<rdzv::Event>& root, int code, int stderr_fd,
                const std::string& json_path) {
  bool said = r.exit_code == exit_code::ok && code != exit_code::ok;
  std::optional<WorkerExit> cause;
  if (root) {
    cause = bridge::remote_exit(*root);
    if (root->node == r.node_rank) cause->remote = false;  // one of ours: found among the local exits
  }
  adopt_root_cause(r, cause, code);
  if (said) {
    if (r.reason.empty()) r.reason = "the job failed after this node's workers finished";
    write_summary(r, -1, json_path);
    return;
  }
  write_summary(r, stderr_fd, json_path);
}

}  // namespace

bool is_multinode(const config::Plan& plan) { return plan.instances > 1 || !plan.rdzv_endpoint.empty(); }

int run_multinode(AgentOptions options, const MultiNodeOptions& mn) {
  const auto& rs = options.plan.spec.rendezvous;
  const int stderr_fd = options.output.stderr_fd;
  NodeConfig cfg = node_config(options.plan, mn.insecure,
                               mn.token ? *mn.token : rdzv::auth::resolve_token(rs.token_file.value_or("")));
  // the built-in rendezvous is served by node 0's agent; etcd by no node of the job
  std::unique_ptr<rdzv::Server> server = cfg.etcd ? nullptr : serve_if_ours(cfg);  // outlives the session: stopped last

  std::unique_ptr<rdzv::Membership> session;
  if (cfg.etcd) session = rdzv::open_etcd_membership(*cfg.etcd, session_options(cfg, 0));
  else session = std::make_unique<rdzv::NodeSession>(session_options(cfg, 0));
  JoinLine line(options.progress, options.output.stderr_fd);
  rdzv::JoinResult first = join_with_line(*session, std::nullopt, line, cfg.where());
  if (mn.joined) mn.joined();
  const config::Plan base = options.plan;  // an elastic job's later generations are planned from it
  apply_rank_table(options, first, cfg);
  DTRAIN_INFO(agent, "node {} of {}: ranks {}-{} of {}, master {}:{}", first.self.node_rank, first.self.nnodes,
              first.self.rank_offset, first.self.rank_offset + first.self.slots - 1, first.self.world_size,
              first.self.master_addr, first.self.master_port);

  const std::string summary_json = options.summary_json;
  ControlThread control(std::move(session), cfg, first, base, options.progress, options.output.stderr_fd);
  std::optional<Agent> agent;  // outlives control.wait(): the control thread posts to it
  try {
    agent.emplace(std::move(options), control.hooks());
    control.start([&a = *agent](Event e) { a.post(std::move(e)); });
    int code = agent->run();
    control.agent_done(code, agent->result().reason);
  } catch (const std::exception& e) {
    control.agent_failed(e);  // the other nodes hear it as this node's failure, not as a loss
    control.wait();
    throw;
  }
  int code = control.wait();
  report_end(agent->result(), control.root_cause(), code, stderr_fd, summary_json);
  return code;
}

}  // namespace dtrain::agent
