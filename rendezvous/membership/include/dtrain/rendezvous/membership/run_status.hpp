#pragma once
// What `dtrain status` asks the built-in rendezvous: the runs it knows, a run's node table, what
// each node's agent last published about its workers (NodeSession::set_progress), and, on demand,
// each node's ranks' stacks (answered by the agents' StacksDesk, stacks_desk.hpp). Each call opens
// its own connection; none joins the run.
#include <chrono>
#include <cstdint>
#include <optional>
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

// Stack requests, in a generation's scope: a requester takes the next number K from the counter
// kStacksAsked and sets stacks_ask_key(K); each node's desk stores its answer under
// stacks_answer_key(K, node rank).
inline constexpr char kStacksAsked[] = "dtrain/stacks/asked";
std::string stacks_ask_key(std::int64_t request);
std::string stacks_answer_key(std::int64_t request, int node_rank);
// Asks the agents of the nodes `ask` (node ranks) of `st` for their ranks' stacks and waits up to
// `wait` for their answers: one per node of `ask`, in its order, nullopt for a node that did not
// answer in time. The answers read are removed from the store.
std::vector<std::optional<std::string>> query_stacks(const ClientOptions& opts, const RunStatus& st,
                                                     const std::vector<int>& ask, std::chrono::milliseconds wait);

}  // namespace dtrain::rdzv
