#pragma once
// The latency path of allreduces up to kBoxBytes per rank, without a sync. Each local rank has two
// boxes in the segment, used in turn (the parity of the box call's number): a header line and
// kBoxBytes of data. A call copies this rank's contribution into its box (into the header line
// itself when it fits in 40 bytes), then writes the header line: the call's fingerprint and, last,
// the flag, the box call's number (release; the stores become visible in order, so the data before
// the flag). It then waits for each peer's flag, compares the peer's fingerprint with its own, and
// reduces every contribution in rank order (the order of every other path) straight from the
// peers' boxes. No sync and no shared counter: per call one header line moves from each rank to
// each peer (the only transfer for up to 40 bytes; the data lines of larger calls follow in
// parallel), and nothing enters the kernel while the peers arrive within the spin. A box is written
// again two box calls later, after this rank has seen every peer's flag of the call in between,
// which each peer raises only after it has read this box: so reuse needs no sync either. A rank
// that gives up on a call marks the flags that have not come (kGivenUp), and a rank raises its flag
// by compare-exchange: the call completes on every rank or on none (as a sync, barrier.hpp).
#include <cstdint>
#include <vector>

#include "../../call.hpp"
#include "peers.hpp"
#include "segment.hpp"
#include "waiter.hpp"

namespace dtrain::coll::shm {

class Boxes {
 public:
  Boxes(Segment& segment, Peers& peers, Waiter& waiter);

  // An allreduce of d.count elements (at most kBoxBytes) of call d, which Peers::begin announced.
  void allreduce(const OpDesc& d, const std::uint8_t* send, std::uint8_t* recv);

 private:
  void publish(const OpDesc& d, const std::uint8_t* send, std::size_t bytes);
  bool arrived(int j) const;
  void wait_for(const OpDesc& d, int j);
  // Marks every peer's flag of this box call that has not come given up (segment.hpp): true when one
  // is, and no rank completes the call then.
  bool give_up();

  Segment& seg_;
  Peers& peers_;
  Waiter& waiter_;
  std::uint64_t calls_ = 0;         // box calls made: the flag value of the current one
  std::vector<const void*> srcs_;   // one contribution per local rank
};

}  // namespace dtrain::coll::shm
