#pragma once
// Point-to-point between local ranks. Every ordered pair has a ring in the segment: a single-producer
// single-consumer byte stream of frames, each a 64-byte header (the message's P2pDesc fingerprint
// and length; a payload of up to 24 bytes rides in the header's last words, so a small message is
// one cache line) and the payload padded to 64 bytes. The sender copies in what fits and publishes
// its head; the receiver checks the header against its own description before it takes a byte,
// copies out and publishes its tail; large messages stream through the ring in pieces, both sides
// copying at once. A message that fits returns from the send before the receiver arrives. A rank
// with nothing to do spins (waiter.hpp) on the positions it waits for, then sleeps on its doorbell
// (a futex word) in slices, checking the abort record, the peer's liveness and the deadline between
// them; whoever moves a position rings the other side's doorbell only when it sleeps, so the fast
// path writes no shared word but the ring's own.
//
// In steps, for the hierarchical engine, which progresses a ring and a socket together: begin()
// once, then until finished(): step() (never blocks; true when it moved bytes), and when nothing
// moved either check() (throws for an abort record, a dead or departed peer or the deadline) or
// wait() (spins, checks, then sleeps up to one slice); end() at the end.
#include <cstdint>
#include <string>

#include "../../call.hpp"
#include "../engine.hpp"
#include "peers.hpp"
#include "segment.hpp"
#include "waiter.hpp"

namespace dtrain::coll::shm {

class Rings {
 public:
  // One direction of a call in flight; frame bytes.
  struct Out {
    const P2pMsg* m = nullptr;
    std::uint64_t total = 0, done = 0;
    bool finished() const { return m == nullptr || (total != 0 && done == total); }
  };
  struct In {
    const P2pMsg* m = nullptr;
    std::uint64_t total = 0, done = 0;
    bool finished() const { return m == nullptr || (total != 0 && done == total); }
  };

  Rings(Segment& segment, Peers& peers, Waiter& waiter) : seg_(segment), peers_(peers), waiter_(waiter) {}

  // Engine::sendrecv and Engine::peek, peers as local ranks.
  void sendrecv(const P2pMsg* out, const P2pMsg* in);
  Engine::Peek peek(int peer, std::uint64_t& fp0, std::uint64_t& fp1);

  void begin(Out& out, In& in);
  bool step(Out& out, In& in);
  void check(Out& out, In& in);
  void wait(Out& out, In& in);
  void end();

 private:
  bool ready(const Out& o, const In& i) const;
  bool send_step(Out& o);
  bool recv_step(In& i);
  void notify(int rank);
  void check_frame(const In& i, const std::uint64_t* header) const;
  std::string call_text(const Out& o, const In& i) const;
  [[noreturn]] void fail_peer(const Out& o, const In& i, int peer, const std::string& what) const;

  Segment& seg_;
  Peers& peers_;
  Waiter& waiter_;
};

}  // namespace dtrain::coll::shm
