#pragma once
// The shared-memory engine's collaborators as ranks on threads (ranks.hpp): each rank maps one
// segment over an in-memory store and builds its Peers, Waiter, Barrier, Boxes, Slots and Rings
// as shm::Engine does, so the unit tests of each (test_segment.cpp, test_barrier.cpp,
// test_boxes.cpp, test_slots.cpp, test_rings.cpp) drive it directly and read the segment's words.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "calls.hpp"
#include "dtrain/common/system.hpp"
#include "dtrain/rendezvous/store/store.hpp"
#include "engine/shm/barrier.hpp"
#include "engine/shm/boxes.hpp"
#include "engine/shm/peers.hpp"
#include "engine/shm/rings.hpp"
#include "engine/shm/segment.hpp"
#include "engine/shm/slots.hpp"
#include "engine/shm/waiter.hpp"
#include "ranks.hpp"

namespace dtrain::coll::test {

struct LocalGroup {
  int size = 2;
  std::chrono::milliseconds timeout{30000};
  std::size_t slot_bytes = 64 * 1024;
  std::size_t p2p_bytes = 64 * 1024;
  int spin_us = 20;
  std::string name_prefix = "dtrain-unit";
};

inline shm::SegmentOptions segment_options(const LocalGroup& g, int r, rdzv::Store* store) {
  shm::SegmentOptions o;
  o.local_rank = r;
  o.global_ranks.resize(static_cast<std::size_t>(g.size));
  std::iota(o.global_ranks.begin(), o.global_ranks.end(), 0);
  o.store = store;
  o.key_prefix = "unit/";
  o.name_prefix = g.name_prefix;
  o.timeout = g.timeout;
  o.slot_bytes = g.slot_bytes;
  o.p2p_bytes = g.p2p_bytes;
  return o;
}

// One local rank: the segment and the collaborators over it.
struct LocalRank {
  LocalRank(const LocalGroup& g, int r, rdzv::Store* store)
      : segment(segment_options(g, r, store)),
        peers(segment, segment_options(g, r, store).global_ranks),
        waiter(g.spin_us, g.size > sys::usable_cpus()),
        barrier(segment, peers, waiter),
        boxes(segment, peers, waiter),
        slots(segment, barrier),
        rings(segment, peers, waiter) {}
  ~LocalRank() { peers.leave(); }

  shm::Segment segment;
  shm::Peers peers;
  shm::Waiter waiter;
  shm::Barrier barrier;
  shm::Boxes boxes;
  shm::Slots slots;
  shm::Rings rings;
};

// Runs one call on a rank as the communicator does: a failure is recorded in the segment's abort
// record (the peers waiting on this rank stop with it) and returned with its status.
template <class F>
std::pair<dtrain_status_t, std::string> run_call(LocalRank& rank, F&& call) {
  auto got = status_of(call);
  if (got.first != DTRAIN_SUCCESS) rank.peers.abort(got.first, got.second);
  return got;
}

// Runs body(rank, r) on g.size threads over one segment; a body may end its rank early
// (rank.reset(): it leaves, as a destroyed communicator does).
inline std::vector<std::string> on_local_ranks(const LocalGroup& g,
                                               const std::function<void(std::unique_ptr<LocalRank>&, int)>& body) {
  auto store = rdzv::make_memory_store();
  return on_threads(g.size, [&](int r) {
    auto rank = std::make_unique<LocalRank>(g, r, store.get());
    body(rank, r);
  });
}

}  // namespace dtrain::coll::test
