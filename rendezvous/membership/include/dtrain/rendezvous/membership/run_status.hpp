#pragma once
// What `dtrain status` asks the built-in rendezvous: the runs it knows, a run's node table, and what
// each node's agent last published about its workers (NodeSession::set_progress). Each call opens
// its own connection; none joins the run.
#include <string>
#include <vector>

#include "dtrain/rendezvous/store/client.hpp"
#include "dtrain/rendezvous/membership/records.hpp"

namespace dtrain::rdzv {

// The key, in a generation's scope, under which node `node_rank` publishes its progress lines.
std::string progress_key(int node_rank);
// ... and its agent's figures for the straggler report (agent/straggler.hpp's encoding).
std::string figures_key(int node_rank);
// The run ids the server knows (with at least one joined node).
std::vector<std::string> list_runs(const ClientOptions& opts);
// The node table of `run_id` (latest generation).
RunStatus query_status(const ClientOptions& opts, const std::string& run_id);
// What each node of `st` last published ("" when nothing), in the order of st.nodes.
std::vector<std::string> query_progress(const ClientOptions& opts, const RunStatus& st);

}  // namespace dtrain::rdzv
