#pragma once
// The collectives that go through the ranks' slots in the segment, with the barrier between their
// steps. Each rank's data area holds three rotating buffers (slot sets); a set is written again
// only three syncs later, by which every rank has left the step that read it.
//   allreduce up to 32 KiB per rank: every rank copies its buffer into its slot, one sync, then
//     every rank reduces all slots itself (the same order everywhere);
//   larger allreduces: pipelined rounds of reduce-scatter + allgather with one sync per round:
//     after sync t a rank copies the others' reduced pieces of round t-1 out, reduces its own piece
//     of round t (its own input read in place, the others' from their slots, one fused n-way pass
//     writing the result to recv and to its slot) and copies the pieces of round t+1 that the
//     others own into its slot;
//   broadcast, allgather, reduce_scatter: one slot-sized step per sync.
#include <cstdint>
#include <vector>

#include "../../call.hpp"
#include "barrier.hpp"
#include "segment.hpp"

namespace dtrain::coll::shm {

class Slots {
 public:
  Slots(Segment& segment, Barrier& barrier);

  // Each within call d (which Peers::begin announced); peers are local ranks, root a local rank.
  void allreduce(const OpDesc& d, const std::uint8_t* send, std::uint8_t* recv);
  void broadcast(const OpDesc& d, const std::uint8_t* send, std::uint8_t* recv);
  void allgather(const OpDesc& d, const std::uint8_t* send, std::uint8_t* recv);
  void reduce_scatter(const OpDesc& d, const std::uint8_t* send, std::uint8_t* recv);

 private:
  struct Rounds;
  void allreduce_small(const OpDesc& d, const std::uint8_t* send, std::uint8_t* recv);
  void allreduce_pipelined(const OpDesc& d, const std::uint8_t* send, std::uint8_t* recv);
  int next_set() { return static_cast<int>(round_++ % 3u); }

  Segment& seg_;
  Barrier& barrier_;
  int me_, n_;
  std::uint64_t round_ = 0;        // slot-set rounds this rank started
  std::vector<const void*> srcs_;  // one source per local rank for the reductions
};

}  // namespace dtrain::coll::shm
