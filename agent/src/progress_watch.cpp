// The watch over the ranks' progress pages (progress_watch.hpp).
#include "progress_watch.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "dtrain/agent/hang.hpp"
#include "dtrain/agent/write_all.hpp"
#include "dtrain/common/progress_page.hpp"

namespace dtrain::agent {

void ProgressWatch::open(EventLoop& loop) {
  timer_.open(loop, [this] { check(progress::now_ns()); });
}

// Checked whenever workers run: a stopped rank is a hang whatever the job sets.
void ProgressWatch::running(bool yes) {
  if (yes && !board_.empty() && !timer_.active()) {
    tracker_.clear();
    sample(board_.snapshot(), progress::now_ns());  // the figures from the start
    timer_.every(1.0);
  }
  if (!yes) {
    if (timer_.active()) sample(board_.snapshot(), progress::now_ns());  // the figures up to the end
    timer_.stop();
    stopped_since_.clear();
  }
}

void ProgressWatch::check(std::int64_t now_ns) {
  auto ranks = board_.snapshot();
  for (auto& r : ranks) {
    // the page's writer is the process that calls the collectives (a wrapper's child, say)
    r.pid = r.page.valid && r.page.pid > 0 ? r.page.pid : pid_of_ ? pid_of_(r.rank) : 0;
    r.state = process_state(r.pid);
    if (r.state == 'T') r.stopped_since_ns = stopped_since_.try_emplace(r.rank, now_ns).first->second;
    else stopped_since_.erase(r.rank);
  }
  Diagnosis d = diagnose(ranks, now_ns, hang_timeout_s_.value_or(kStuckAfterS));
  sample(ranks, now_ns);
  std::string headline = stragglers(now_ns);
  // published whether or not a rank uses dtrain's collectives: the unseen ones are named as such
  if (publish_) publish_(diagnosis_text(d) + (headline.empty() ? "" : "\n" + headline));
  bool timed_out = d.hung && hang_timeout_s_ && (d.culprit >= 0 || d.waited_s >= *hang_timeout_s_ + kBlameWaitS);
  if (!d.stopped && !timed_out) return;
  Hang h{d.stopped ? "hang: " + d.verdict : fmt::format("hang: {} (output.hang_timeout_s {})", d.verdict, *hang_timeout_s_),
         d.lines, d.culprit, "", d.blame};
  for (const auto& r : ranks)
    if (r.rank == d.culprit && r.state != 0) h.state = state_text(r.state);
  hung_(h);
}

void ProgressWatch::sample(const std::vector<RankProgress>& ranks, std::int64_t now_ns) {
  std::vector<straggler::RankTimes> totals;
  for (const auto& r : ranks) totals.push_back(straggler::totals(r.rank, r.page, now_ns));
  tracker_.add(now_ns, std::move(totals));
}

// The report's lines to <run folder>/stragglers, replaced whole: a reader never sees half of them.
void ProgressWatch::write_report(const std::vector<std::string>& lines) const {
  if (board_.dir().empty()) return;
  std::string text;
  for (const auto& l : lines) text += l + "\n";
  auto path = board_.dir() / "stragglers";  // straggler::read_report's
  auto tmp = path;
  tmp += ".new";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  bool ok = write_all(fd, text);
  ::close(fd);
  if (ok) ::rename(tmp.c_str(), path.c_str());
}

// The window's report (this node's figures shared, the others' merged), written out, and the warning.
std::string ProgressWatch::stragglers(std::int64_t now_ns) {
  auto local = tracker_.window();
  if (share_) share_(straggler::encode({local, tracker_.whole()}));
  double span_s = local.empty() ? 0 : local.front().span_s;
  std::vector<int> mine;
  for (const auto& t : local) mine.push_back(t.rank);
  int seen = 0;
  auto r = straggler::report(merged(std::move(local), true, seen));
  auto lines = straggler::report_lines(r, scope(fmt::format("the last {:.0f} s", span_s), seen));
  write_report(lines);
  const auto* slowest = r.slowest_rank();
  if (slowest && std::find(mine.begin(), mine.end(), slowest->rank) == mine.end()) slowest = nullptr;  // its node warns
  bool full = span_s >= 3;  // a window with enough in it
  bool due = !warned_ns_ || now_ns - *warned_ns_ >= static_cast<std::int64_t>(kWarnEveryS * 1e9);
  if (warn_ && warn_share_ > 0 && slowest && slowest->share > warn_share_ && full && due) {
    warned_ns_ = now_ns;
    warn_(fmt::format("warning: straggler: {} over the last {:.0f} s (output.straggler_share {})",
                      straggler::slowest_text(r), span_s, warn_share_));
  }
  return lines.empty() ? "" : lines[0];
}

std::vector<std::string> ProgressWatch::straggler_lines() const {
  auto local = tracker_.whole();
  double span_s = local.empty() ? 0 : local.front().span_s;
  if (span_s < 1) return {};  // a few of the coarse clock's ticks: no figure worth a line
  int seen = 0;
  auto r = straggler::report(merged(std::move(local), false, seen));
  return straggler::report_lines(r, scope(fmt::format("the whole run, {:.1f} s", span_s), seen));
}

std::vector<straggler::RankTimes> ProgressWatch::merged(std::vector<straggler::RankTimes> local, bool window,
                                                        int& seen) const {
  seen = 1;
  if (!peers_) return local;
  std::set<int> ranks;
  for (const auto& t : local) ranks.insert(t.rank);
  for (const auto& [node, text] : peers_()) {
    auto f = straggler::decode(text);
    bool any = false;
    for (auto& t : window ? f.window : f.whole)
      if (ranks.insert(t.rank).second) {
        local.push_back(t);
        any = true;
      }
    seen += any;
  }
  return local;
}

std::string ProgressWatch::scope(const std::string& what, int seen) const {
  if (nodes_ <= 1) return what;
  return seen >= nodes_ ? fmt::format("{}, all {} nodes", what, nodes_) : fmt::format("{}, {} of {} nodes", what, seen, nodes_);
}

}  // namespace dtrain::agent
