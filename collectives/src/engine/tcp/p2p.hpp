#pragma once
// Point-to-point over a group's sockets. A message is a frame of the point-to-point channel on the
// pair's socket (WireHeader: seq = the message's number between the pair, fp0/fp1 = its P2pDesc
// fingerprint, then the payload). The receiver takes a frame the collective channel parked in the
// peer's Inbox first, else reads the socket; it compares the header with its own description before
// it takes a byte of payload. A send is done once the kernel has the whole frame, so one that fits
// the socket buffers (hundreds of KiB on Linux) returns before the receiver arrives. Both directions
// of a sendrecv progress together on non-blocking sockets, polling both when neither moves.
//
// In steps, for the hierarchical engine: begin(), step() (never blocks; true when it moved bytes)
// until finished(), wait() when nothing moved (polls the sockets up to max_ms; throws past the
// deadline).
#include <cstddef>
#include <cstdint>
#include <string>

#include "../../call.hpp"
#include "../engine.hpp"
#include "failures.hpp"
#include "links.hpp"
#include "wire.hpp"

namespace dtrain::coll::tcp {

class P2p {
 public:
  struct Xfer {
    const P2pMsg* out = nullptr;
    const P2pMsg* in = nullptr;
    WireHeader sh{}, rh{};
    std::size_t sent = 0, stotal = 0;  // header + payload bytes sent
    std::size_t hgot = 0, got = 0;     // header and payload bytes received
    bool send_done = true, recv_done = true;
    bool finished() const { return send_done && recv_done; }
  };

  P2p(Links& links, Inbox& inbox, Failures& failures) : links_(links), inbox_(inbox), failures_(failures) {}

  // Sends `out` and receives `in` together (either may be null), by their deadlines.
  void sendrecv(const P2pMsg* out, const P2pMsg* in);
  // Engine::peek: a frame parked in the peer's inbox, else the socket's next bytes (MSG_PEEK).
  Engine::Peek peek(int peer, std::uint64_t& fp0, std::uint64_t& fp1);

  void begin(Xfer& x, const P2pMsg* out, const P2pMsg* in);
  bool step(Xfer& x);
  void wait(Xfer& x, int max_ms);

 private:
  bool send_some(Xfer& x);
  bool recv_some(Xfer& x);
  void check_header(const Xfer& x, const WireHeader& h) const;
  std::string call_text(const Xfer& x) const;
  [[noreturn]] void timed_out(const Xfer& x);

  Links& links_;
  Inbox& inbox_;
  Failures& failures_;
};

}  // namespace dtrain::coll::tcp
