#pragma once
// What a run of the agent ended with (AgentResult), and how it is told: the failure summary (root
// cause, other failures, where the logs are), its JSON form, or a clean run's one line.
#include <optional>
#include <string>
#include <vector>

#include "dtrain/agent/worker_exit.hpp"

namespace dtrain::agent {

struct AgentResult {
  int exit_code = 0;
  int restarts = 0;                          // generations started beyond the first
  std::optional<WorkerExit> root_cause;      // first failure of the last generation
  std::vector<WorkerExit> other_failures;
  std::string reason;                        // "", "interrupted by SIGINT", "max_runtime_s 5 passed", ...
  std::string run_dir;                       // plan.json and, when kept, the logs
  std::string logs;                          // the last attempt's log folder; "" when not kept
  int ranks = 0;                             // workers of the job (all nodes)
  int local_ranks = 0;                       // ... on this node
  int node_rank = 0;                         // this node's rank (of the last generation)
  double duration_s = 0;                     // from the start of run() to the end
  std::vector<std::string> hang;             // the stuck ranks and where, when the job hung
  // when the job hung: where each rank of this node was in Python (stacks.hpp's stack_summary), and
  // every rank's full dump (stack_lines)
  std::vector<std::string> stack_summary, stacks;
  std::vector<std::string> stragglers;       // the straggler report over the run (straggler.hpp): the end of the summary
};

// Human summary of a failed run (what dtrain launch prints at the end) and its JSON form.
std::string summary_text(const AgentResult& r);
std::string summary_json(const AgentResult& r);
// The one line of a successful run: "dtrain: job finished: 4 ranks exited 0 in 12.3 s (no restarts)".
std::string success_line(const AgentResult& r);
// The end of a run on stderr (the summary, or the success line; then the straggler report; nothing
// when stderr_fd < 0) and,
// with `json_path`, the JSON.
void write_summary(const AgentResult& r, int stderr_fd, const std::string& json_path);
// A multi-node job's result as every node reports it: `root` (the root cause the nodes agreed on,
// from its failure event) becomes the root cause, this node's own failures the others; `exit_code`
// the node's exit status.
void adopt_root_cause(AgentResult& r, const std::optional<WorkerExit>& root, int exit_code);

}  // namespace dtrain::agent
