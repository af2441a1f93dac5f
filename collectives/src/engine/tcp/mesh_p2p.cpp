// TCP mesh: point-to-point. A message is a frame of the point-to-point channel on the pair's socket
// (WireHeader: seq = the message's number between the pair, fp0/fp1 = its P2pDesc fingerprint, then
// the payload). The receiver takes a frame an exchange parked in the peer's inbox first, else reads
// the socket; it compares the header with its own description before it takes a byte of payload. A
// send is done once the kernel has the whole frame, so one that fits the socket buffers (hundreds of
// KiB on Linux) returns before the receiver arrives. Both directions of a sendrecv progress together
// on non-blocking sockets, polling both when neither moves.
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "mesh.hpp"

namespace dtrain::coll::tcp {
namespace {
bool transient(int err) { return err == EAGAIN || err == EWOULDBLOCK || err == EINTR; }
}  // namespace

void Mesh::p2p_begin(P2pXfer& x, const P2pMsg* out, const P2pMsg* in) {
  x = P2pXfer{};
  x.out = out;
  x.in = in;
  for (const P2pMsg* m : {out, in})
    if (m != nullptr && pairs_[static_cast<std::size_t>(m->peer)].fd < 0)
      throw CollError(DTRAIN_ERR_ABORTED, fmt::format("{}: the communicator's connections are closed", p2p_call(x)));
  if (out != nullptr) {
    x.sh = WireHeader{kWireMagic, kP2p, out->d.seq, out->d.fp0(), out->d.fp1(), out->d.bytes()};
    x.stotal = sizeof(WireHeader) + out->d.bytes();
    x.send_done = false;
  }
  if (in != nullptr) {
    x.recv_done = false;
    auto& box = inbox_[static_cast<std::size_t>(in->peer)];
    if (!box.empty()) {  // parked by an exchange
      check_p2p_header(x, box.front().h);
      if (in->d.bytes()) std::memcpy(in->dst, box.front().payload.data(), in->d.bytes());
      box.pop_front();
      x.recv_done = true;
    }
  }
}

bool Mesh::p2p_step(P2pXfer& x) {
  const bool a = p2p_send_some(x);
  return p2p_recv_some(x) || a;
}

void Mesh::sendrecv(const P2pMsg* out, const P2pMsg* in) {
  P2pXfer x;
  p2p_begin(x, out, in);
  while (!x.finished())
    if (!p2p_step(x) && !x.finished()) p2p_wait(x, 1000);
}

void Mesh::p2p_wait(P2pXfer& x, int max_ms) {
  pollfd pfd[2];
  nfds_t n = 0;
  if (!x.send_done) pfd[n++] = {pairs_[static_cast<std::size_t>(x.out->peer)].fd, POLLOUT, 0};
  if (!x.recv_done) pfd[n++] = {pairs_[static_cast<std::size_t>(x.in->peer)].fd, POLLIN, 0};
  const auto deadline = std::min(x.send_done ? Clock::time_point::max() : x.out->d.deadline,
                                 x.recv_done ? Clock::time_point::max() : x.in->d.deadline);
  if (Clock::now() >= deadline) p2p_timeout(x);
  ::poll(pfd, n, std::min(max_ms, ms_left(deadline)));
}

bool Mesh::p2p_send_some(P2pXfer& x) {
  if (x.send_done) return false;
  const std::size_t hdr = sizeof x.sh;
  iovec iov[2];
  int n = 0;
  if (x.sent < hdr) {
    iov[n++] = {reinterpret_cast<std::uint8_t*>(&x.sh) + x.sent, hdr - x.sent};
    if (x.stotal > hdr) iov[n++] = {const_cast<void*>(x.out->src), x.stotal - hdr};
  } else {
    iov[n++] = {const_cast<std::uint8_t*>(static_cast<const std::uint8_t*>(x.out->src)) + (x.sent - hdr),
                x.stotal - x.sent};
  }
  msghdr mh{};
  mh.msg_iov = iov;
  mh.msg_iovlen = static_cast<std::size_t>(n);
  const ssize_t k = ::sendmsg(pairs_[static_cast<std::size_t>(x.out->peer)].fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (k > 0) {
    x.sent += static_cast<std::size_t>(k);
    x.send_done = x.sent == x.stotal;
    return true;
  }
  if (k < 0 && !transient(errno))
    peer_failed(p2p_call(x), x.out->peer,
                fmt::format("connection broke before it took the message: {}", errno_text(errno)));
  return false;
}

bool Mesh::p2p_recv_some(P2pXfer& x) {
  if (x.recv_done) return false;
  const int fd = pairs_[static_cast<std::size_t>(x.in->peer)].fd;
  const std::size_t hdr = sizeof x.rh, len = x.in->d.bytes();
  const ssize_t k = x.hgot < hdr
                        ? ::recv(fd, reinterpret_cast<std::uint8_t*>(&x.rh) + x.hgot, hdr - x.hgot, MSG_DONTWAIT)
                        : ::recv(fd, static_cast<std::uint8_t*>(x.in->dst) + x.got, len - x.got, MSG_DONTWAIT);
  if (k == 0)
    peer_failed(p2p_call(x), x.in->peer,
                "closed the connection before it sent the whole message (exited, failed, or destroyed its "
                "communicator)");
  if (k < 0) {
    if (!transient(errno))
      peer_failed(p2p_call(x), x.in->peer, fmt::format("connection broke while receiving: {}", errno_text(errno)));
    return false;
  }
  if (x.hgot < hdr) {
    x.hgot += static_cast<std::size_t>(k);
    if (x.hgot == hdr) check_p2p_header(x, x.rh);
  } else {
    x.got += static_cast<std::size_t>(k);
  }
  x.recv_done = x.hgot == hdr && x.got == len;
  return true;
}

coll::Engine::Peek Mesh::peek(int peer, std::uint64_t& fp0, std::uint64_t& fp1) {
  const auto& box = inbox_[static_cast<std::size_t>(peer)];
  if (!box.empty()) {
    fp0 = box.front().h.fp0;
    fp1 = box.front().h.fp1;
    return coll::Engine::kMessage;
  }
  const int fd = pairs_[static_cast<std::size_t>(peer)].fd;
  if (fd < 0) throw CollError(DTRAIN_ERR_ABORTED, "recv from any rank: the communicator's connections are closed");
  WireHeader h{};
  const ssize_t k = ::recv(fd, &h, sizeof h, MSG_PEEK | MSG_DONTWAIT);
  if (k == 0 || (k < 0 && !transient(errno))) return coll::Engine::kGone;  // closed (or broken) with nothing left
  if (k != static_cast<ssize_t>(sizeof h) || h.channel != kP2p) return coll::Engine::kNone;
  fp0 = h.fp0;
  fp1 = h.fp1;
  return coll::Engine::kMessage;
}

void Mesh::check_p2p_header(const P2pXfer& x, const WireHeader& h) const {
  const P2pDesc& d = x.in->d;
  const int from = world(x.in->peer);
  if (h.magic != kWireMagic)
    throw CollError(DTRAIN_ERR_INTERNAL, fmt::format("{}: corrupt stream from {}", p2p_call(x), peer_text(x.in->peer)));
  if (h.channel != kP2p)
    throw CollError(DTRAIN_ERR_MISMATCH,
                    fmt::format("mismatched calls: {} on rank {}, but the next data from rank {} belongs to its "
                                "collective call {} #{}: rank {} entered a collective without sending this message "
                                "first (a recv takes the sender's next message to this rank, in order)",
                                p2p_call(x), world(rank_), from, describe_fingerprint(h.fp0, h.fp1), h.seq, from));
  if (h.seq != d.seq || h.fp0 != d.fp0() || h.fp1 != d.fp1() || h.len != d.bytes())
    throw CollError(DTRAIN_ERR_MISMATCH,
                    fmt::format("mismatched point-to-point calls: recv {} from rank {} on rank {} does not match "
                                "rank {}'s send {} to rank {} (messages between two ranks are matched in order; "
                                "tag, count and dtype must agree)",
                                d.text(), from, world(rank_), from, describe_p2p(h.seq, h.fp0, h.fp1), world(rank_)));
}

std::string Mesh::p2p_call(const P2pXfer& x) const {
  std::string s;
  if (x.out) s = fmt::format("send {} to rank {}", x.out->d.text(), world(x.out->peer));
  if (x.in) s += fmt::format("{}recv {} from rank {}", s.empty() ? "" : " with ", x.in->d.text(), world(x.in->peer));
  return s;
}

void Mesh::p2p_timeout(const P2pXfer& x) {
  std::string waiting;
  if (!x.recv_done)
    waiting = fmt::format("{} has not sent {}", peer_text(x.in->peer), x.hgot == 0 ? "it" : "all of it");
  if (!x.send_done)
    waiting += fmt::format("{}{} has not taken it ({} of {} bytes still to send)", waiting.empty() ? "" : "; ",
                           peer_text(x.out->peer), x.stotal - x.sent, x.stotal);
  throw CollError(DTRAIN_ERR_TIMEOUT,
                  fmt::format("{} timed out after {} on rank {}: {}; the connection is open, so the peer is alive "
                              "but busy elsewhere, or blocked itself (two ranks that both send a large message "
                              "to each other before receiving wait on each other: use dtrain_sendrecv)",
                              p2p_call(x), seconds_text((!x.recv_done ? x.in : x.out)->d.timeout), world(rank_), waiting));
}

}  // namespace dtrain::coll::tcp
