#include "event_log.hpp"

namespace dtrain::rdzv {

std::string_view kind_name(EventKind kind) {
  switch (kind) {
    case EventKind::failure: return "failure";
    case EventKind::stopped: return "stopped";
    case EventKind::lost: return "lost";
    case EventKind::joined: return "joined";
  }
  return "?";
}

const Event& EventLog::append(EventKind kind, Event e) {
  e.kind = std::string(kind_name(kind));
  e.seq = std::int64_t(events_.size()) + 1;
  e.generation = generation_;
  e.root_cause = !fatal_;  // every kind ends the generation
  fatal_ = true;
  events_.push_back(std::move(e));
  return events_.back();
}

const Event* EventLog::first_after(std::int64_t after) const {
  std::size_t i = after < 0 ? 0 : std::size_t(after);  // seq k is at index k - 1
  return i < events_.size() ? &events_[i] : nullptr;
}

const Event* EventLog::root_cause() const {
  const Event* first = nullptr;
  for (const auto& e : events_)
    if (e.root_cause) {
      first = &e;
      break;
    }
  // a failure that only saw a peer fail yields to the first failure of its own, as the agents agree
  if (first == nullptr || !saw_peer_fail(*first)) return first;
  for (const auto& e : events_)
    if (e.kind == "failure" && e.rank >= 0 && !saw_peer_fail(e)) return &e;
  return first;
}

}  // namespace dtrain::rdzv
