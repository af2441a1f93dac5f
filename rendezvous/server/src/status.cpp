#include "status.hpp"

#include <algorithm>

namespace dtrain::rdzv {

RunStatus run_status(const std::string& run_id, std::int64_t generation, const JoinBarrier& join,
                     const EventLog& events, Clock::time_point now) {
  RunStatus st;
  st.run_id = run_id;
  st.generation = generation;
  st.instances = join.instances();
  st.joined = join.joined();
  st.closed = join.closed();
  st.world_size = join.world_size();
  st.master_addr = join.master_addr();
  st.master_port = join.master_port();
  if (const Event* e = events.root_cause()) st.root_cause = describe_event(*e);
  for (const auto& n : join.nodes()) {
    NodeStatus ns;
    ns.node_rank = n->rank >= 0 ? n->rank : n->requested;
    ns.host = n->host;
    ns.addr = n->addr;
    ns.state = n->state;
    ns.slots = n->slots;
    ns.running = n->running;
    ns.exited = n->exited;
    ns.restarts = n->restarts;
    ns.heartbeat_age_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - n->last_seen).count();
    st.nodes.push_back(ns);
  }
  std::sort(st.nodes.begin(), st.nodes.end(), [](auto& a, auto& b) { return a.node_rank < b.node_rank; });
  return st;
}

}  // namespace dtrain::rdzv
