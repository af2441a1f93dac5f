#pragma once
// The engine of a group of one: every collective is a copy from send to recv (none in place).
#include "../engine.hpp"

namespace dtrain::coll::self {

class Engine final : public coll::Engine {
 public:
  const char* name() const noexcept override { return "self"; }
  void barrier(const OpDesc&) override {}
  void allreduce(const OpDesc& d, const void* send, void* recv) override;
  void broadcast(const OpDesc& d, const void* send, void* recv) override;
  void allgather(const OpDesc& d, const void* send, void* recv) override;
  void reduce_scatter(const OpDesc& d, const void* send, void* recv) override;
  // A group of one has no peer (the communicator handles messages to itself).
  void sendrecv(const P2pMsg* out, const P2pMsg* in) override;
  Peek peek(int, std::uint64_t&, std::uint64_t&) override { return kNone; }
  void abort(dtrain_status_t, const std::string&) noexcept override {}
};

}  // namespace dtrain::coll::self
