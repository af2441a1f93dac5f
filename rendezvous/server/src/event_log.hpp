#pragma once
// The job events of one scope, pure: appended in order with seq 1, 2, ...; the first fatal event
// (a worker failure, a node that stopped on its own, a lost node, a node that waits to join an
// elastic job: every kind) is the root cause and makes the scope fatal: the generation is over. The
// kind is typed here and becomes the record's text ("failure", "stopped", "lost", "joined") for the wire.
#include <cstdint>
#include <string_view>
#include <vector>

#include "dtrain/rendezvous/membership/records.hpp"

namespace dtrain::rdzv {

enum class EventKind { failure, stopped, lost, joined };

std::string_view kind_name(EventKind kind);

class EventLog {
 public:
  explicit EventLog(std::int64_t generation) : generation_(generation) {}

  // Stamps e with the kind, the next seq, the generation and the root-cause flag; returns the stored event.
  const Event& append(EventKind kind, Event e);
  // The first event with seq > after, or null.
  const Event* first_after(std::int64_t after) const;
  // The root cause, or null before any fatal event: the first fatal event, unless that is a worker
  // failure that only saw a peer fail (saw_peer_fail) and a failure of its own came after it.
  const Event* root_cause() const;
  // True once a fatal event happened: the job is stopping, no further losses are declared.
  bool fatal() const { return fatal_; }
  const std::vector<Event>& events() const { return events_; }

 private:
  std::int64_t generation_;
  std::vector<Event> events_;
  bool fatal_ = false;
};

}  // namespace dtrain::rdzv
