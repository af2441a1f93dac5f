#pragma once
// The collectives' channel over a group's sockets: the one primitive the algorithms (group.hpp) are
// written against. An exchange sends to one rank and receives from another at the same time, both
// directions advancing together on non-blocking sockets (sendmsg of header + payload, recv of header
// then payload), polling both when neither moves (without sleeping for the first spin_us), until
// both are done or the call's deadline passes; stream() runs many such steps with one pair of peers
// pipelined (a send goes as soon as what it depends on has arrived, while receives go on). Every
// message carries a WireHeader with the call's sequence number and fingerprint; a difference fails
// the call with DTRAIN_ERR_MISMATCH. A point-to-point frame met on the way is parked whole in the
// peer's Inbox and the receive goes on with the next header. Failures: failures.hpp; every way this
// rank fails a collective here first tells the peers that it gave up on it (Failures::give_up).
#include <poll.h>

#include <cstddef>
#include <functional>
#include <vector>

#include "../../call.hpp"
#include "failures.hpp"
#include "links.hpp"
#include "wire.hpp"

namespace dtrain::coll::tcp {

class Channel {
 public:
  Channel(Links& links, Inbox& inbox, Failures& failures, std::size_t chunk_bytes, int spin_us);

  int rank() const { return links_.rank(); }
  int size() const { return links_.size(); }
  std::size_t chunk_bytes() const { return chunk_bytes_; }

  // Sends slen bytes to rank `to` and receives rlen bytes from rank `from` concurrently (either may
  // be -1), by d.deadline.
  void exchange(const OpDesc& d, int to, const void* sbuf, std::size_t slen, int from, void* rbuf,
                std::size_t rlen);
  // A pipelined run of exchanges with one pair of peers (a ring's steps in one go): message i sends
  // segs[i].send (slen bytes) to `to` and receives segs[i].rlen bytes from `from` into
  // segs[i].recv, each direction in order. Send i starts once fewer than `lead` receives before it
  // are missing (i < receives done + lead); when receive i is complete, on_recv(i) runs before
  // receive i+1 starts (so a receive buffer may be reused by the next one). Both directions
  // progress together, by d.deadline.
  struct Segment {
    const void* send = nullptr;
    std::size_t slen = 0;
    void* recv = nullptr;
    std::size_t rlen = 0;
  };
  void stream(const OpDesc& d, int to, int from, const std::vector<Segment>& segs, std::size_t lead,
              const std::function<void(std::size_t)>& on_recv);

 private:
  struct Xfer;
  bool send_some(const OpDesc& d, Xfer& x);
  bool recv_some(const OpDesc& d, Xfer& x);
  void check_header(const OpDesc& d, const Xfer& x) const;
  // This rank gives up on d (Failures::give_up), sparing the socket of a half-sent message.
  void give_up(const OpDesc& d, const Xfer& x) const;
  void wait_for(const OpDesc& d, const Xfer& x);
  bool spin_ready(pollfd* pfd, int n) const;

  Links& links_;
  Inbox& inbox_;
  Failures& failures_;
  std::size_t chunk_bytes_;
  int spin_us_;
};

}  // namespace dtrain::coll::tcp
