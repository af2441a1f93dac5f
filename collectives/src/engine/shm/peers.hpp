#pragma once
// The local ranks as the segment shows them: what each one is doing (the call it is in, its
// fingerprint), whether it is still there, and the abort record through which a failing rank stops
// the others. Every collective (barrier.hpp, boxes.hpp) and point-to-point wait (rings.hpp) asks
// here between its sleeps, and every failure message is written here, so that all of them name the
// ranks the same way.
//
// Fingerprints: each engine call publishes its fingerprint (count, kind, dtype, op, root, seq) in
// the slot of its engine-call parity, so a peer that already began its next call never overwrites
// what a slower rank still compares (two engine calls with one sequence number, as the hierarchical
// engine makes, have different parities).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "../../call.hpp"
#include "segment.hpp"

namespace dtrain::coll::shm {

class Peers {
 public:
  Peers(Segment& segment, std::vector<int> global_ranks);

  int me() const { return me_; }
  int size() const { return n_; }
  // The world rank of local rank j, for messages.
  int world(int j) const { return granks_[static_cast<std::size_t>(j)]; }
  // Engine calls this rank began (the parity of the current one selects its fingerprint slot).
  std::uint64_t calls() const { return calls_; }

  // This rank enters the engine call d, and leaves it.
  void begin(const OpDesc& d);
  void end();
  // Whether local rank j published call d (this engine call) with d's fingerprint; false while it
  // has not begun it.
  bool same_call(int j, const OpDesc& d) const;
  // Throws DTRAIN_ERR_MISMATCH listing every rank's call when any rank's fingerprint of the current
  // engine call differs from d's.
  void check_fingerprints(const OpDesc& d) const;
  // A peer that published call d.seq of this parity with another fingerprint while ready() (whether
  // what this rank waits for has come after all) is still false: DTRAIN_ERR_MISMATCH. A rank that
  // waits for arrivals which a peer in another kind of call never makes would otherwise wait for
  // its deadline.
  void check_peer_calls(const OpDesc& d, const std::function<bool()>& ready) const;

  // Local rank j destroyed its communicator before arrived() became true, or its process is gone:
  // throws DTRAIN_ERR_PEER naming it. arrived() is asked after the peer's state is read: a peer that
  // arrives and then leaves at once (its last call done) has arrived, and what it left stays readable.
  void check_alive(const OpDesc& d, int j, const std::function<bool()>& arrived) const;
  // "" while local rank j is there; else what became of it: "destroyed its communicator" or
  // "(pid N) died".
  std::string gone(int j) const;

  // Records a failure (the first one wins) and wakes every waiting local rank.
  void abort(dtrain_status_t status, const std::string& msg) noexcept;
  bool aborted() const;
  // Throws the abort record as seen from `call` ("allreduce #3 ...", "send #2 to rank 1").
  [[noreturn]] void throw_abort(const std::string& call) const;
  // This rank found its arrival word of `call` given up by a peer (segment.hpp): throws the abort
  // record that peer writes right after (waiting for it, bounded).
  [[noreturn]] void throw_given_up(const std::string& call) const;
  // Runs the checks between two sleeps of a wait. When one throws, this rank gives up on the call for
  // every rank (give_up() marks the ranks that have not arrived, true when one is), records why and
  // rethrows; unless every rank arrived meanwhile (give_up() false): then the call is complete
  // everywhere, and this returns so that the wait ends as usual.
  void check_or_give_up(const std::function<void()>& checks, const std::function<bool()>& give_up);

  // Throws DTRAIN_ERR_TIMEOUT for collective d: the ranks not arrived(j) and where every rank is.
  [[noreturn]] void fail_timeout(const OpDesc& d, const std::function<bool(int)>& arrived) const;
  // What local rank j is doing, for timeout messages: "in allreduce #3", "in send #2 to rank 1", ...
  std::string state_of(int j) const;

  // This rank leaves: peers waiting on it (in a collective or for a message) learn it at once.
  void leave() noexcept;

 private:
  std::string calls_text(int parity) const;

  Segment& seg_;
  int me_;
  int n_;
  std::vector<int> granks_;
  std::uint64_t calls_ = 0;
};

}  // namespace dtrain::coll::shm
