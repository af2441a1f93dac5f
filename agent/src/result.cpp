// What a run ended with, as a summary (dtrain/agent/result.hpp): the root cause, the other failures,
// and where the logs are.
#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cerrno>

#include "dtrain/agent/result.hpp"
#include "dtrain/agent/write_all.hpp"
#include "dtrain/common/errors.hpp"
#include "failure_report.hpp"
#include "visible_text.hpp"

namespace dtrain::agent {

namespace {

nlohmann::json error_json(const WorkerExit& w);

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
  if (w.cpus_error) j["cpus_error"] = true;
  j["first_exception"] = w.first_exception;
  j["error_file"] = w.error_file.empty() ? nlohmann::json(nullptr) : nlohmann::json(w.error_file);
  j["error"] = error_json(w);
  j["peer_failure"] = w.peer_failure ? nlohmann::json(*w.peer_failure) : nlohmann::json(nullptr);
  j["hint"] = w.hint;
  if (!w.hang.empty()) j["hang"] = {{"state", w.hang_state}, {"where", w.hang}};
  if (w.remote) {
    j["remote"] = true;
    j["host"] = w.host;
  }
  return j;
}

// The failure in its own words, and where they come from.
nlohmann::json error_json(const WorkerExit& w) {
  nlohmann::json e;
  if (w.remote) e["source"] = "report";
  else if (w.error) e["source"] = "error_file";
  else if (!w.first_exception.empty()) e["source"] = "first_exception";
  else if (!w.last_stderr.empty()) e["source"] = "stderr_tail";
  else return nullptr;
  if (w.error) {
    e["message"] = w.error->message;
    e["traceback"] = w.error->traceback;
    e["timestamp"] = w.error->timestamp;
  }
  e["lines"] = evidence_of(w).lines;
  return e;
}

void evidence_text(std::string& s, const WorkerExit& w) {
  Evidence ev = evidence_of(w);
  if (!ev.heading.empty()) {
    s += fmt::format("  {}:\n", ev.heading);
    for (const auto& l : ev.lines) s += fmt::format("    | {}\n", visible_line(l));
  }
  if (!w.hint.empty()) s += fmt::format("  hint: {}\n", visible_lines(w.hint));
}

std::string peer_text(const WorkerExit& w) {
  if (!w.peer_failure) return "";
  return *w.peer_failure >= 0 ? fmt::format(" (its collectives saw rank {} fail)", *w.peer_failure)
                              : " (its collectives saw a peer fail)";
}

}  // namespace

std::string summary_text(const AgentResult& r) {
  std::string s;
  if (r.root_cause) {
    const auto& w = *r.root_cause;
    s += fmt::format("dtrain: job failed (exit status {}){}\n", r.exit_code,
                     r.restarts > 0 ? fmt::format(" after {} restart(s)", r.restarts) : "");
    if (w.remote)
      s += fmt::format("  root cause: rank {} ({}node {}{}{}): {}\n", w.rank,
                       w.local_rank >= 0 ? fmt::format("local rank {}, ", w.local_rank) : "", w.node_rank,
                       w.host.empty() ? "" : fmt::format(" ({})", w.host),
                       w.pid > 0 ? fmt::format(", pid {}", w.pid) : "", w.describe());
    else
      s += fmt::format("  root cause: rank {} (local rank {}, node {}, pid {}): {} after {:.2f} s\n", w.rank,
                       w.local_rank, w.node_rank, w.pid, w.describe(), w.duration_s);
    evidence_text(s, w);
  } else if (!r.reason.empty()) {
    s += fmt::format("dtrain: job stopped (exit status {}): {}\n", r.exit_code, visible_lines(r.reason));
  } else {
    s += fmt::format("dtrain: job failed (exit status {})\n", r.exit_code);
  }
  if (r.root_cause && !r.reason.empty()) s += fmt::format("  then: {}\n", visible_lines(r.reason));
  if (!r.hang.empty()) {
    s += "  where each rank of this node was:\n";
    for (const auto& l : r.hang) s += fmt::format("    {}\n", visible_lines(l));
  }
  if (!r.stacks.empty()) {
    s += "  Python stacks (each rank's main thread; all threads below):\n";
    for (const auto& l : r.stack_summary) s += fmt::format("    {}\n", l);
    for (const auto& l : r.stacks) s += fmt::format("    {}\n", l);
  }
  if (!r.other_failures.empty()) {
    s += "  other workers that did not exit 0:\n";
    for (const auto& w : r.other_failures)
      s += fmt::format("    rank {} (local rank {}, pid {}): {}{}{}\n", w.rank, w.local_rank, w.pid, w.describe(),
                       w.stopped_by_agent ? " (stopped by dtrain)" : "", peer_text(w));
  }
  if (!r.logs.empty())
    s += fmt::format("  logs: {}/rank-R.{{out,err}}\n", r.logs);
  else
    s += "  logs: not kept (--log-dir DIR or output.log_dir keeps per-rank logs)\n";
  for (const auto& l : r.stragglers) s += "  " + l + "\n";
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
                   {"duration_s", r.duration_s}, {"hang", r.hang},
                   {"stack_summary", r.stack_summary}, {"stacks", r.stacks}, {"stragglers", r.stragglers}};
  j["root_cause"] = r.root_cause ? exit_json(*r.root_cause) : nlohmann::json(nullptr);
  j["other_failures"] = nlohmann::json::array();
  for (const auto& w : r.other_failures) j["other_failures"].push_back(exit_json(w));
  // a worker's bytes need not be UTF-8 (nor a line cut in the middle of a character): replaced, not thrown
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

void write_summary(const AgentResult& r, int stderr_fd, const std::string& json_path) {
  if (stderr_fd >= 0 && r.exit_code != 0) write_all(stderr_fd, summary_text(r));
  if (stderr_fd >= 0 && r.exit_code == 0) {
    std::string s = success_line(r) + "\n";
    for (const auto& l : r.stragglers) s += "dtrain: " + l + "\n";
    write_all(stderr_fd, s);
  }
  if (json_path.empty()) return;
  int fd = ::open(json_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || !write_all(fd, summary_json(r)))
    write_all(stderr_fd, fmt::format("dtrain: cannot write the summary to {}: {}\n", json_path, errno_text(errno)));
  if (fd >= 0) ::close(fd);
}

void adopt_root_cause(AgentResult& r, const std::optional<WorkerExit>& root, int exit_code) {
  r.exit_code = exit_code;
  if (!root) return;
  std::optional<WorkerExit> own;  // the root cause is one of this node's workers
  std::vector<WorkerExit> others;
  auto sort = [&](const WorkerExit& w) {
    if (!root->remote && !own && w.rank == root->rank) own = w;
    else others.push_back(w);
  };
  if (r.root_cause) sort(*r.root_cause);
  for (const auto& w : r.other_failures) sort(w);
  r.root_cause = own ? own : root;
  r.other_failures = std::move(others);
  r.reason.clear();  // what stopped this node was that failure
}

}  // namespace dtrain::agent
