#pragma once
// Shared-memory engine for the ranks of one host: one segment per communicator and host. The engine
// owns its collaborators and routes each call to one of them:
//   Segment  the mapping and its layout (segment.hpp)
//   Peers    what each local rank is doing, its liveness, the abort record (peers.hpp)
//   Waiter   the adaptive spin and futex sleep of every wait (waiter.hpp)
//   Barrier  the syncs of a call and its fingerprint check (barrier.hpp)
//   Boxes    allreduces up to kBoxBytes without a sync (boxes.hpp)
//   Slots    the other collectives through the ranks' slots (slots.hpp)
//   Rings    point-to-point (rings.hpp)
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "../engine.hpp"
#include "barrier.hpp"
#include "boxes.hpp"
#include "peers.hpp"
#include "rings.hpp"
#include "segment.hpp"
#include "slots.hpp"
#include "waiter.hpp"

namespace dtrain::coll::shm {

struct Options {
  SegmentOptions segment;
  int spin_us = 50;
};

class Engine final : public coll::Engine {
 public:
  explicit Engine(const Options& options);  // maps (or creates) the segment; throws CollError
  ~Engine() override;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  int local_rank() const { return segment_.local_rank(); }
  int local_size() const { return segment_.local_size(); }

  const char* name() const noexcept override { return "shm"; }
  void barrier(const OpDesc& d) override;
  void allreduce(const OpDesc& d, const void* send, void* recv) override;
  // From local rank d.root.
  void broadcast(const OpDesc& d, const void* send, void* recv) override;
  void allgather(const OpDesc& d, const void* send, void* recv) override;
  void reduce_scatter(const OpDesc& d, const void* send, void* recv) override;
  // Peers are local ranks.
  void sendrecv(const P2pMsg* out, const P2pMsg* in) override { rings_.sendrecv(out, in); }
  Peek peek(int peer, std::uint64_t& fp0, std::uint64_t& fp1) override { return rings_.peek(peer, fp0, fp1); }
  // Records a failure so waiting local ranks stop at once with the same status.
  void abort(dtrain_status_t status, const std::string& msg) noexcept override { peers_.abort(status, msg); }

  // For the hierarchical engine, which progresses a ring and a socket together.
  Rings& rings() { return rings_; }

 private:
  // Runs one engine call between Peers::begin and Peers::end.
  template <class F>
  void call(const OpDesc& d, F&& body);

  Segment segment_;
  Peers peers_;
  Waiter waiter_;
  Barrier barrier_;
  Boxes boxes_;
  Slots slots_;
  Rings rings_;
};

}  // namespace dtrain::coll::shm
