#pragma once
// TCP engine: every rank of the group over sockets. The engine owns its collaborators and routes
// each call to one of them:
//   Links     the connected sockets (links.hpp), made by the Bootstrap (bootstrap.hpp)
//   Failures  how the group fails together: the store's abort record, shut sockets, and one outcome
//             of every collective on every rank (failures.hpp)
//   Channel   the collectives' exchanges (channel.hpp), with the Inbox of point-to-point frames it
//             meets on the way (wire.hpp)
//   P2p       point-to-point messages (p2p.hpp)
//   Group     the algorithms over every rank (group.hpp)
// The user's buffers are staged for the in-place algorithms: allreduce runs on recv (or on a float32
// copy for float16/bfloat16), reduce_scatter on a scratch copy of send, allgather and broadcast
// straight in recv.
#include "../engine.hpp"
#include "../staging.hpp"
#include "bootstrap.hpp"
#include "channel.hpp"
#include "failures.hpp"
#include "group.hpp"
#include "links.hpp"
#include "p2p.hpp"
#include "wire.hpp"

namespace dtrain::coll::tcp {

class Engine final : public coll::Engine {
 public:
  explicit Engine(const Options& options);  // connects the sockets; throws CollError

  const char* name() const noexcept override { return "tcp"; }
  void barrier(const OpDesc& d) override;
  void allreduce(const OpDesc& d, const void* send, void* recv) override;
  void broadcast(const OpDesc& d, const void* send, void* recv) override;
  void allgather(const OpDesc& d, const void* send, void* recv) override;
  void reduce_scatter(const OpDesc& d, const void* send, void* recv) override;
  void sendrecv(const P2pMsg* out, const P2pMsg* in) override { p2p_.sendrecv(out, in); }
  Peek peek(int peer, std::uint64_t& fp0, std::uint64_t& fp1) override { return p2p_.peek(peer, fp0, fp1); }
  void abort(dtrain_status_t status, const std::string& msg) noexcept override { failures_.abort(status, msg); }
  // Throws when a peer gave up on collective d, which is done on this rank (Failures::confirm); every
  // collective above ends with it, the hierarchical engine's leaders call it after their part.
  void confirm(const OpDesc& d) { failures_.confirm(d); }

  // For the hierarchical engine, which runs its leaders' group over this channel and progresses a
  // socket and a shared-memory ring together.
  Channel& channel() { return channel_; }
  P2p& p2p() { return p2p_; }
  Staging& staging() { return staging_; }

 private:
  Links links_;
  Inbox inbox_;
  Failures failures_;
  Channel channel_;
  P2p p2p_;
  Group all_;
  Staging staging_;
};

}  // namespace dtrain::coll::tcp
