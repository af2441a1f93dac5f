// Point-to-point over a group's sockets (p2p.hpp).
#include "p2p.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>


namespace dtrain::coll::tcp {
void P2p::begin(Xfer& x, const P2pMsg* out, const P2pMsg* in) {
  x = Xfer{};
  x.out = out;
  x.in = in;
  for (const P2pMsg* m : {out, in})
    if (m != nullptr && links_.fd(m->peer) < 0)
      throw CollError(DTRAIN_ERR_ABORTED, fmt::format("{}: the communicator's connections are closed", call_text(x)));
  if (out != nullptr) {
    x.sh = WireHeader{kWireMagic, kP2p, out->d.seq, out->d.fp0(), out->d.fp1(), out->d.bytes()};
    x.stotal = sizeof(WireHeader) + out->d.bytes();
    x.send_done = false;
  }
  if (in != nullptr) {
    x.recv_done = false;
    auto& box = inbox_[static_cast<std::size_t>(in->peer)];
    if (!box.empty()) {  // parked by an exchange
      check_header(x, box.front().h);
      if (in->d.bytes()) std::memcpy(in->dst, box.front().payload.data(), in->d.bytes());
      box.pop_front();
      x.recv_done = true;
    }
  }
}

bool P2p::step(Xfer& x) {
  const bool a = send_some(x);
  return recv_some(x) || a;
}

void P2p::sendrecv(const P2pMsg* out, const P2pMsg* in) {
  Xfer x;
  begin(x, out, in);
  while (!x.finished())
    if (!step(x) && !x.finished()) wait(x, 1000);
}

void P2p::wait(Xfer& x, int max_ms) {
  pollfd pfd[2];
  nfds_t n = 0;
  if (!x.send_done) pfd[n++] = {links_.fd(x.out->peer), POLLOUT, 0};
  if (!x.recv_done) pfd[n++] = {links_.fd(x.in->peer), POLLIN, 0};
  const auto deadline = std::min(x.send_done ? Clock::time_point::max() : x.out->d.deadline,
                                 x.recv_done ? Clock::time_point::max() : x.in->d.deadline);
  if (Clock::now() >= deadline) timed_out(x);
  ::poll(pfd, n, std::min(max_ms, ms_left(deadline)));
}

bool P2p::send_some(Xfer& x) {
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
  const ssize_t k = ::sendmsg(links_.fd(x.out->peer), &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (k > 0) {
    x.sent += static_cast<std::size_t>(k);
    x.send_done = x.sent == x.stotal;
    return true;
  }
  if (k < 0 && !transient(errno))
    failures_.peer_failed(call_text(x), x.out->peer,
                fmt::format("connection broke before it took the message: {}", errno_text(errno)));
  return false;
}

bool P2p::recv_some(Xfer& x) {
  if (x.recv_done) return false;
  const int fd = links_.fd(x.in->peer);
  const std::size_t hdr = sizeof x.rh, len = x.in->d.bytes();
  const ssize_t k = x.hgot < hdr
                        ? ::recv(fd, reinterpret_cast<std::uint8_t*>(&x.rh) + x.hgot, hdr - x.hgot, MSG_DONTWAIT)
                        : ::recv(fd, static_cast<std::uint8_t*>(x.in->dst) + x.got, len - x.got, MSG_DONTWAIT);
  if (k == 0)
    failures_.peer_failed(call_text(x), x.in->peer,
                "closed the connection before it sent the whole message (exited, failed, or destroyed its "
                "communicator)");
  if (k < 0) {
    if (!transient(errno))
      failures_.peer_failed(call_text(x), x.in->peer, fmt::format("connection broke while receiving: {}", errno_text(errno)));
    return false;
  }
  if (x.hgot < hdr) {
    x.hgot += static_cast<std::size_t>(k);
    if (x.hgot == hdr) check_header(x, x.rh);
  } else {
    x.got += static_cast<std::size_t>(k);
  }
  x.recv_done = x.hgot == hdr && x.got == len;
  return true;
}

Engine::Peek P2p::peek(int peer, std::uint64_t& fp0, std::uint64_t& fp1) {
  const auto& box = inbox_[static_cast<std::size_t>(peer)];
  if (!box.empty()) {
    fp0 = box.front().h.fp0;
    fp1 = box.front().h.fp1;
    return Engine::kMessage;
  }
  const int fd = links_.fd(peer);
  if (fd < 0) throw CollError(DTRAIN_ERR_ABORTED, "recv from any rank: the communicator's connections are closed");
  WireHeader h{};
  const ssize_t k = ::recv(fd, &h, sizeof h, MSG_PEEK | MSG_DONTWAIT);
  if (k == 0 || (k < 0 && !transient(errno))) return Engine::kGone;  // closed (or broken) with nothing left
  if (k == static_cast<ssize_t>(sizeof h) && h.channel == kGiveUp) return Engine::kGone;  // and sends nothing more
  if (k != static_cast<ssize_t>(sizeof h) || h.channel != kP2p) return Engine::kNone;
  fp0 = h.fp0;
  fp1 = h.fp1;
  return Engine::kMessage;
}

void P2p::check_header(const Xfer& x, const WireHeader& h) const {
  const P2pDesc& d = x.in->d;
  const int from = links_.world(x.in->peer);
  if (h.magic != kWireMagic)
    throw CollError(DTRAIN_ERR_INTERNAL, fmt::format("{}: corrupt stream from {}", call_text(x), links_.text(x.in->peer)));
  if (h.channel == kGiveUp)
    failures_.peer_failed(call_text(x), x.in->peer, fmt::format("gave up on call #{}", h.seq), true);
  if (h.channel != kP2p)
    throw CollError(DTRAIN_ERR_MISMATCH,
                    fmt::format("mismatched calls: {} on rank {}, but the next data from rank {} belongs to its "
                                "collective call {} #{}: rank {} entered a collective without sending this message "
                                "first (a recv takes the sender's next message to this rank, in order)",
                                call_text(x), links_.world(links_.rank()), from, describe_fingerprint(h.fp0, h.fp1), h.seq, from));
  if (h.seq != d.seq || h.fp0 != d.fp0() || h.fp1 != d.fp1() || h.len != d.bytes())
    throw CollError(DTRAIN_ERR_MISMATCH,
                    fmt::format("mismatched point-to-point calls: recv {} from rank {} on rank {} does not match "
                                "rank {}'s send {} to rank {} (messages between two ranks are matched in order; "
                                "tag, count and dtype must agree)",
                                d.text(), from, links_.world(links_.rank()), from, describe_p2p(h.seq, h.fp0, h.fp1), links_.world(links_.rank())));
}

std::string P2p::call_text(const Xfer& x) const {
  std::string s;
  if (x.out) s = fmt::format("send {} to rank {}", x.out->d.text(), links_.world(x.out->peer));
  if (x.in) s += fmt::format("{}recv {} from rank {}", s.empty() ? "" : " with ", x.in->d.text(), links_.world(x.in->peer));
  return s;
}

void P2p::timed_out(const Xfer& x) {
  std::string waiting;
  if (!x.recv_done)
    waiting = fmt::format("{} has not sent {}", links_.text(x.in->peer), x.hgot == 0 ? "it" : "all of it");
  if (!x.send_done)
    waiting += fmt::format("{}{} has not taken it ({} of {} bytes still to send)", waiting.empty() ? "" : "; ",
                           links_.text(x.out->peer), x.stotal - x.sent, x.stotal);
  throw CollError(DTRAIN_ERR_TIMEOUT,
                  fmt::format("{} timed out after {} on rank {}: {}; the connection is open, so the peer is alive "
                              "but busy elsewhere, or blocked itself (two ranks that both send a large message "
                              "to each other before receiving wait on each other: use dtrain_sendrecv)",
                              call_text(x), seconds_text((!x.recv_done ? x.in : x.out)->d.timeout), links_.world(links_.rank()), waiting));
}

}  // namespace dtrain::coll::tcp
