#pragma once
// The local ranks' barrier: every sync of a call waits until every local rank has reached it. The
// first sync of an engine call then compares every rank's fingerprint of the call (peers.hpp), so
// mismatched calls fail on every rank instead of hanging.
//
// Each rank publishes the number of syncs it reached in its own cache line (RankCtl::epoch: no
// shared counter) and waits until every rank's number reached its own; sleepers wait on the
// header's phase word, which an arrival bumps, entering the kernel only when someone sleeps.
// Between sleeps (waiter.hpp): the abort record, dead or departed peers, a peer in another call, the
// deadline.
//
// One outcome on every rank: a rank that gives up on a sync (its deadline, a dead peer, a peer's
// abort record) first marks the words of the ranks not arrived there (kGivenUp, by compare-exchange),
// and a rank arrives by compare-exchange on its word: each late rank either arrived first (and the
// sync may pass) or finds its word marked and fails with the abort record. So a sync passes on every
// rank or on none, and a late rank never completes a call another rank gave up on.
#include <cstdint>

#include "../../call.hpp"
#include "peers.hpp"
#include "segment.hpp"
#include "waiter.hpp"

namespace dtrain::coll::shm {

class Barrier {
 public:
  Barrier(Segment& segment, Peers& peers, Waiter& waiter) : seg_(segment), peers_(peers), waiter_(waiter) {}

  // This rank's next sync within call d (which Peers::begin announced): returns once every local
  // rank reached it; throws CollError for an abort, a dead or departed peer, mismatched calls or the
  // deadline.
  void sync(const OpDesc& d);
  // Whether local rank j reached this rank's latest sync.
  bool arrived(int j) const;

 private:
  bool all_arrived() const;
  void check(const OpDesc& d);
  // Marks every rank not arrived at this sync given up (segment.hpp): true when one is, and no rank
  // passes the sync then.
  bool give_up();

  Segment& seg_;
  Peers& peers_;
  Waiter& waiter_;
  std::uint64_t epoch_ = 0;    // syncs this rank reached
  std::uint64_t checked_ = 0;  // the engine call (Peers::calls()) whose fingerprints were compared
};

}  // namespace dtrain::coll::shm
