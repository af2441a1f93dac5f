#pragma once
// A communicator's point-to-point streams, one per ordered pair of ranks: the n-th send from a to b
// is the n-th message b receives from a, each checked against the sender's description before a
// byte is taken (the engines carry them: Engine::sendrecv). Two kinds of message wait here instead
// of in an engine: those this rank sent to itself (a queue that its receives take from, in order)
// and the user's messages that a collective met at the head of a pair's stream before its own
// (parked, with their numbers, for the user's later receives: messages and collectives stay
// separate streams, so a message sent before a collective may still be received after it).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "call.hpp"
#include "engine/engine.hpp"

namespace dtrain::coll {

// One direction of a point-to-point call: the buffer (src to send, dst to receive), its count and
// dtype, the peer (a rank of the communicator, the caller's own included) and the tag. `device`: the
// data moves through NCCL; only the description travels here, for matching.
struct P2pArgs {
  const void* src = nullptr;
  void* dst = nullptr;
  std::size_t count = 0;
  dtrain_dtype_t dtype = DTRAIN_UINT8;
  int peer = 0;
  int tag = 0;
  bool device = false;
};

// The tag of a collective's point-to-point messages: negative, so never a user's (tags are >= 0),
// and naming the op and root in mismatch messages (describe_p2p).
int coll_tag(OpKind kind, int root);

class Mailbox {
 public:
  // world: the world rank of every rank of the communicator (for messages); rank: this one.
  Mailbox(std::vector<int> world, int rank);

  // A sendrecv's two directions, numbered (post()) and then carried (deliver()).
  struct Post {
    P2pMsg out, in;
    bool sending = false, receiving = false;
    bool self_out = false, self_in = false, parked_in = false;
  };
  // Numbers the directions of a sendrecv (either may be null) with the deadline; throws
  // DTRAIN_ERR_INVALID_ARGUMENT, numbering nothing, for a receive from itself with no message to
  // itself waiting and none sent in the same call.
  Post post(const P2pArgs* send, const P2pArgs* recv, Clock::time_point deadline, std::chrono::milliseconds timeout);
  // Carries them: to or from itself through the queue, a parked message from its place, the rest
  // through the engine.
  void deliver(Engine& engine, const Post& p);

  // The next message of collective d to or from `peer` (tagged coll_tag(), by d's deadline).
  P2pMsg coll_msg(const OpDesc& d, int peer, bool sending, const void* buf, std::size_t count);
  // Before collective d receives from `peer`: parks the user's messages that come first in the
  // pair's stream.
  void park_user_messages(Engine& engine, const OpDesc& d, int peer);

  // The tag of the next message to itself (-1: none waiting), or of `peer`'s next parked one.
  int self_tag() const { return self_.empty() ? -1 : self_.front().d.tag; }
  int parked_tag(int peer) const {
    const auto& box = parked_[static_cast<std::size_t>(peer)];
    return box.empty() ? -1 : box.front().d.tag;
  }

 private:
  struct Queued {
    P2pDesc d;
    std::vector<std::uint8_t> bytes;
  };
  P2pMsg numbered(const P2pArgs& a, bool sending, Clock::time_point deadline, std::chrono::milliseconds timeout);
  void from_queue(std::deque<Queued>& queue, const P2pMsg& m, bool itself);

  std::vector<int> world_;
  int rank_;
  std::vector<std::uint64_t> sent_, received_;  // messages per peer
  std::deque<Queued> self_;
  std::vector<std::deque<Queued>> parked_;  // per peer
};

}  // namespace dtrain::coll
