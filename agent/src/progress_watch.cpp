// The watch over the ranks' progress pages (progress_watch.hpp).
#include "progress_watch.hpp"

#include <fmt/format.h>

#include "dtrain/agent/hang.hpp"
#include "dtrain/common/progress_page.hpp"

namespace dtrain::agent {

void ProgressWatch::open(EventLoop& loop) {
  timer_.open(loop, [this] { check(progress::now_ns()); });
}

// Checked whenever workers run: a stopped rank is a hang whatever the job sets.
void ProgressWatch::running(bool yes) {
  if (yes && !board_.empty() && !timer_.active()) timer_.every(1.0);
  if (!yes) {
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
  // published whether or not a rank uses dtrain's collectives: the unseen ones are named as such
  if (publish_) publish_(diagnosis_text(d));
  bool timed_out = d.hung && hang_timeout_s_ && (d.culprit >= 0 || d.waited_s >= *hang_timeout_s_ + kBlameWaitS);
  if (!d.stopped && !timed_out) return;
  Hang h{d.stopped ? "hang: " + d.verdict : fmt::format("hang: {} (output.hang_timeout_s {})", d.verdict, *hang_timeout_s_),
         d.lines, d.culprit, "", d.blame};
  for (const auto& r : ranks)
    if (r.rank == d.culprit && r.state != 0) h.state = state_text(r.state);
  hung_(h);
}

}  // namespace dtrain::agent
