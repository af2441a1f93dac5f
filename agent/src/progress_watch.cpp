// The watch over the ranks' progress pages (progress_watch.hpp).
#include "progress_watch.hpp"

#include <fmt/format.h>

#include "dtrain/agent/hang.hpp"
#include "dtrain/common/progress_page.hpp"

namespace dtrain::agent {

void ProgressWatch::open(EventLoop& loop) {
  timer_.open(loop, [this] { check(progress::now_ns()); });
}

void ProgressWatch::running(bool yes) {
  bool wanted = (hang_timeout_s_ || publish_) && !board_.empty();
  if (yes && wanted && !timer_.active()) timer_.every(1.0);
  if (!yes) timer_.stop();
}

void ProgressWatch::check(std::int64_t now_ns) {
  Diagnosis d = diagnose(board_.snapshot(), now_ns, hang_timeout_s_.value_or(kStuckAfterS));
  // published whether or not a rank uses dtrain's collectives: the unseen ones are named as such
  if (publish_) publish_(diagnosis_text(d));
  if (!d.hung || !hang_timeout_s_) return;
  hung_({fmt::format("hang: {} (output.hang_timeout_s {})", d.verdict, *hang_timeout_s_), d.lines});
}

}  // namespace dtrain::agent
