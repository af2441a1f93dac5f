// The end-of-run summary: the root cause, the other failures, and where the logs are.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dtrain/agent/agent.hpp"

namespace dtrain::agent {

namespace {

nlohmann::json exit_json(const WorkerExit& w) {
  nlohmann::json j{{"rank", w.rank},
                   {"local_rank", w.local_rank},
                   {"node_rank", w.node_rank},
                   {"pid", w.pid},
                   {"status", w.status()},
                   {"duration_s", w.duration_s},
                   {"stopped_by_agent", w.stopped_by_agent},
                   {"description", w.describe()},
                   {"last_stderr", w.last_stderr}};
  if (w.signal != 0) j["signal"] = w.signal;
  else j["exit_code"] = w.exit_code;
  if (w.exec_errno != 0) j["exec_errno"] = w.exec_errno;
  if (w.workdir_error) j["workdir_error"] = true;
  return j;
}

}  // namespace

std::string summary_text(const AgentResult& r) {
  std::string s;
  if (r.root_cause) {
    const auto& w = *r.root_cause;
    s += fmt::format("dtrain: job failed (exit status {}){}\n", r.exit_code,
                     r.restarts > 0 ? fmt::format(" after {} restart(s)", r.restarts) : "");
    s += fmt::format("  root cause: rank {} (local rank {}, node {}, pid {}): {} after {:.2f} s\n", w.rank,
                     w.local_rank, w.node_rank, w.pid, w.describe(), w.duration_s);
    if (!w.last_stderr.empty()) {
      s += "  last lines of its stderr:\n";
      for (const auto& l : w.last_stderr) s += fmt::format("    | {}\n", l);
    }
  } else if (!r.reason.empty()) {
    s += fmt::format("dtrain: job stopped (exit status {}): {}\n", r.exit_code, r.reason);
    if (!r.hang.empty()) {
      s += "  where each rank of this node was:\n";
      for (const auto& l : r.hang) s += fmt::format("    {}\n", l);
    }
  } else {
    s += fmt::format("dtrain: job failed (exit status {})\n", r.exit_code);
  }
  if (r.root_cause && !r.reason.empty()) s += fmt::format("  then: {}\n", r.reason);
  if (!r.other_failures.empty()) {
    s += "  other workers that did not exit 0:\n";
    for (const auto& w : r.other_failures)
      s += fmt::format("    rank {} (local rank {}, pid {}): {}{}\n", w.rank, w.local_rank, w.pid, w.describe(),
                       w.stopped_by_agent ? " (stopped by dtrain)" : "");
  }
  if (!r.logs.empty())
    s += fmt::format("  logs: {}/rank-R.{{out,err}}\n", r.logs);
  else
    s += "  logs: not kept (--log-dir DIR or output.log_dir keeps per-rank logs)\n";
  return s;
}

std::string success_line(const AgentResult& r) {
  std::string ranks = fmt::format("{} rank{}", r.ranks, r.ranks == 1 ? "" : "s");
  if (r.local_ranks != r.ranks) ranks += fmt::format(" ({} on this node)", r.local_ranks);
  std::string restarts = r.restarts == 0 ? "no restarts" : fmt::format("{} restart{}", r.restarts, r.restarts == 1 ? "" : "s");
  return fmt::format("dtrain: job finished: {} exited 0 in {:.1f} s ({})", ranks, r.duration_s, restarts);
}

std::string summary_json(const AgentResult& r) {
  nlohmann::json j{{"exit_code", r.exit_code}, {"restarts", r.restarts}, {"reason", r.reason},
                   {"run_dir", r.run_dir}, {"logs", r.logs}, {"ranks", r.ranks},
                   {"duration_s", r.duration_s}, {"hang", r.hang}};
  j["root_cause"] = r.root_cause ? exit_json(*r.root_cause) : nlohmann::json(nullptr);
  j["other_failures"] = nlohmann::json::array();
  for (const auto& w : r.other_failures) j["other_failures"].push_back(exit_json(w));
  return j.dump(2) + "\n";
}

}  // namespace dtrain::agent
