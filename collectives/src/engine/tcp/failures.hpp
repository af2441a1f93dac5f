#pragma once
// How the ranks of a TCP group fail together. A failing rank records why in the store
// (<key_prefix>abort: its status, world rank and message) and shuts its sockets down, so peers
// waiting on it stop at once; a rank whose peer broke its connection reports the root cause that
// peer recorded (with its status) when there is one; a rank that times out asks every rank through
// the store where it is (<key_prefix>status/<seq>/<rank>) and names who never reached the call.
//
// One outcome per call: a rank that gives up on a collective first says so in-band, a kGiveUp header
// on every socket (before the slower store and shutdown), and a rank completes a collective only
// after checking that no such header waits on its sockets (confirm()). So a late rank that finds
// everything it needs from a peer already in its socket (the peer sent it, then gave up waiting)
// fails the call with the peer's recorded cause instead of completing it. What remains is a race of
// one network delay: a rank that completes before the header reaches it keeps its result, and fails
// at its next call.
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "../../call.hpp"
#include "dtrain/rendezvous/store/store.hpp"
#include "links.hpp"

namespace dtrain::coll::tcp {

// A failing rank's abort record, as abort() writes it: "STATUS rank R: MESSAGE", STATUS one of the
// library's error statuses in decimal. nullopt for any other bytes (a peer gone wrong, another
// program writing the store under the same key): the caller reports them as such, never as a status.
struct AbortRecord {
  dtrain_status_t status;
  std::string text;  // "rank R: MESSAGE"
};
std::optional<AbortRecord> parse_abort_record(std::string_view v);

class Failures {
 public:
  Failures(Links& links, rdzv::Store& store, std::string key_prefix, std::chrono::milliseconds timeout)
      : links_(links), store_(store), prefix_(std::move(key_prefix)), timeout_(timeout) {}

  // Publishes the failure to the store (the first one wins) and shuts every socket down.
  void abort(dtrain_status_t status, const std::string& msg) noexcept;
  // This rank gives up on collective d: a kGiveUp header on every socket (once), except the one to
  // `partial_to` (-1: none), where a message is half sent.
  void give_up(const OpDesc& d, int partial_to) noexcept;
  // Collective d is done on this rank: throws the recorded cause when a peer's kGiveUp header of d
  // waits on a socket (one poll() without waiting; a peek where there is data). A peer that gave up
  // on a later call (it finished d first) does not fail d.
  void confirm(const OpDesc& d);
  // `call` on this rank lost `peer` (`what`: how the connection ended): throws the root cause the
  // peer recorded, else DTRAIN_ERR_PEER naming it. `gave_up`: the peer said so, and its record may
  // take as long as its timeout report (timed_out) to come.
  [[noreturn]] void peer_failed(const std::string& call, int peer, const std::string& what, bool gave_up = false);
  // Collective d passed its deadline waiting to send to `to` and/or receive from `from` (-1: not).
  [[noreturn]] void timed_out(const OpDesc& d, int to, int from);

 private:
  // How long a timed-out rank gathers the others' reports before it throws (and records why).
  std::chrono::milliseconds report_wait() const {
    return std::min<std::chrono::milliseconds>(timeout_ / 4, std::chrono::seconds(2));
  }

  Links& links_;
  rdzv::Store& store_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
  std::atomic<bool> aborted_{false};  // abort() may come from another thread (dtrain_comm_abort)
  bool gave_up_ = false;
  std::vector<pollfd> polls_;  // every peer's socket, for confirm()
};

}  // namespace dtrain::coll::tcp
