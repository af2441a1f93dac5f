// The collectives' channel (channel.hpp).
#include "channel.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <thread>

#include <fmt/format.h>

#include "../../wait.hpp"

namespace dtrain::coll::tcp {
// One exchange() in flight; sent counts over header + payload, hgot over the header being read, got
// over the payload (of the collective's message, or of the frame being parked).
struct Channel::Xfer {
  WireHeader sh;
  WireHeader rh{};
  int to, from;
  int sfd, rfd;
  const void* sbuf;
  void* rbuf;
  std::size_t slen, rlen;
  std::size_t stotal;
  std::size_t sent = 0, hgot = 0, got = 0;
  bool parking = false;  // reading a point-to-point frame into inbox_[from].back()
  bool send_done, recv_done;
};

Channel::Channel(Links& links, Inbox& inbox, Failures& failures, std::size_t chunk_bytes, int spin_us)
    : links_(links), inbox_(inbox), failures_(failures), chunk_bytes_(std::max<std::size_t>(chunk_bytes, 4096)),
      spin_us_(std::max(spin_us, 0)) {}

void Channel::exchange(const OpDesc& d, int to, const void* sbuf, std::size_t slen, int from, void* rbuf,
                    std::size_t rlen) {
  Xfer x{.sh = WireHeader{kWireMagic, kCollective, d.seq, d.fp0(), d.fp1(), slen},
         .to = to,
         .from = from,
         .sfd = to >= 0 ? links_.fd(to) : -1,
         .rfd = from >= 0 ? links_.fd(from) : -1,
         .sbuf = sbuf,
         .rbuf = rbuf,
         .slen = slen,
         .rlen = rlen,
         .stotal = sizeof(WireHeader) + slen,
         .send_done = to < 0,
         .recv_done = from < 0};
  if ((to >= 0 && x.sfd < 0) || (from >= 0 && x.rfd < 0))
    throw CollError(DTRAIN_ERR_ABORTED, fmt::format("{}: the communicator's connections are closed", d.text()));
  while (!x.send_done || !x.recv_done) {
    bool progress = false;
    if (!x.send_done) progress = send_some(d, x);
    if (!x.recv_done) progress = recv_some(d, x) || progress;
    if (!progress && (!x.send_done || !x.recv_done)) wait_for(d, x);
  }
}

// Neither direction moved: poll the unfinished ones (a second at most), or fail past the deadline.
void Channel::wait_for(const OpDesc& d, const Xfer& x) {
  pollfd pfd[2];
  int n = 0;
  if (!x.send_done) pfd[n++] = {x.sfd, POLLOUT, 0};
  if (!x.recv_done) pfd[n++] = {x.rfd, POLLIN, 0};
  if (Clock::now() >= d.deadline) {
    give_up(d, x);
    failures_.timed_out(d, x.send_done ? -1 : x.to, x.recv_done ? -1 : x.from);
  }
  if (spin_ready(pfd, n)) return;
  ::poll(pfd, static_cast<nfds_t>(n), ms_left(d.deadline));
}

// Polls without sleeping for up to spin_us_: true as soon as one of the sockets is ready. A peer on
// this host usually answers within microseconds, sooner than a rank sleeping in poll() wakes up;
// poll() rather than retrying recv(), which would contend for the socket's lock with the delivery.
bool Channel::spin_ready(pollfd* pfd, int n) const {
  if (spin_us_ == 0) return false;
  const auto until = Clock::now() + std::chrono::microseconds(spin_us_);
  do {
    if (::poll(pfd, static_cast<nfds_t>(n), 0) > 0) return true;
    cpu_relax();
  } while (Clock::now() < until);
  return false;
}

void Channel::stream(const OpDesc& d, int to, int from, const std::vector<Segment>& segs, std::size_t lead,
                  const std::function<void(std::size_t)>& on_recv) {
  const std::size_t n = segs.size();
  Xfer x{.sh = WireHeader{kWireMagic, kCollective, d.seq, d.fp0(), d.fp1(), 0},
         .to = to,
         .from = from,
         .sfd = links_.fd(to),
         .rfd = links_.fd(from),
         .sbuf = nullptr,
         .rbuf = nullptr,
         .slen = 0,
         .rlen = 0,
         .stotal = 0,
         .send_done = true,
         .recv_done = n == 0};
  if (x.sfd < 0 || x.rfd < 0)
    throw CollError(DTRAIN_ERR_ABORTED, fmt::format("{}: the communicator's connections are closed", d.text()));
  auto start_recv = [&](std::size_t i) {
    x.rbuf = segs[i].recv;
    x.rlen = segs[i].rlen;
    x.hgot = x.got = 0;
  };
  if (n != 0) start_recv(0);
  std::size_t si = 0, ri = 0;  // the send and the receive in progress
  while (si < n || ri < n) {
    bool progress = false;
    if (x.send_done && si < n && si < ri + lead) {  // the next send may go
      x.sh.len = x.slen = segs[si].slen;
      x.sbuf = segs[si].send;
      x.stotal = sizeof(WireHeader) + x.slen;
      x.sent = 0;
      x.send_done = false;
    }
    if (!x.send_done) {
      progress = send_some(d, x);
      if (x.send_done) ++si;
    }
    if (!x.recv_done) {
      progress = recv_some(d, x) || progress;
      if (x.recv_done) {
        on_recv(ri);
        if (++ri < n) {
          start_recv(ri);
          x.recv_done = false;
        }
      }
    }
    if (!progress && (!x.send_done || !x.recv_done)) wait_for(d, x);
  }
}

// One sendmsg of what is left (header and payload in one call while the header is not out yet).
bool Channel::send_some(const OpDesc& d, Xfer& x) {
  iovec iov[2];
  int n = 0;
  if (x.sent < sizeof x.sh) {
    iov[n++] = {reinterpret_cast<std::uint8_t*>(&x.sh) + x.sent, sizeof x.sh - x.sent};
    if (x.slen) iov[n++] = {const_cast<void*>(x.sbuf), x.slen};
  } else {
    iov[n++] = {const_cast<std::uint8_t*>(static_cast<const std::uint8_t*>(x.sbuf)) + (x.sent - sizeof x.sh),
                x.stotal - x.sent};
  }
  msghdr mh{};
  mh.msg_iov = iov;
  mh.msg_iovlen = static_cast<std::size_t>(n);
  ssize_t k = ::sendmsg(x.sfd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (k > 0) {
    x.sent += static_cast<std::size_t>(k);
    x.send_done = x.sent == x.stotal;
    return true;
  }
  if (k < 0 && !transient(errno)) {
    const int err = errno;
    failures_.give_up(d, x.to);
    failures_.peer_failed(d.text(), x.to, fmt::format("connection broke while sending: {}", errno_text(err)));
  }
  return false;
}

// One recv: the rest of the header, or the rest of the payload once the header is in and checked
// (or of a point-to-point frame being parked).
bool Channel::recv_some(const OpDesc& d, Xfer& x) {
  ssize_t k;
  if (x.hgot < sizeof x.rh)
    k = ::recv(x.rfd, reinterpret_cast<std::uint8_t*>(&x.rh) + x.hgot, sizeof x.rh - x.hgot, MSG_DONTWAIT);
  else if (x.parking)
    k = ::recv(x.rfd, inbox_[static_cast<std::size_t>(x.from)].back().payload.data() + x.got, x.rh.len - x.got,
               MSG_DONTWAIT);
  else
    k = ::recv(x.rfd, static_cast<std::uint8_t*>(x.rbuf) + x.got, x.rlen - x.got, MSG_DONTWAIT);
  if (k == 0) {
    give_up(d, x);
    failures_.peer_failed(d.text(), x.from, "closed the connection (exited, failed, or destroyed its communicator)");
  }
  if (k < 0) {
    if (!transient(errno)) {
      const int err = errno;
      give_up(d, x);
      failures_.peer_failed(d.text(), x.from, fmt::format("connection broke while receiving: {}", errno_text(err)));
    }
    return false;
  }
  if (x.hgot < sizeof x.rh) {
    x.hgot += static_cast<std::size_t>(k);
    if (x.hgot < sizeof x.rh) return true;
    if (x.rh.magic == kWireMagic && x.rh.channel == kP2p) {
      inbox_[static_cast<std::size_t>(x.from)].push_back(Parked{x.rh, std::vector<std::uint8_t>(x.rh.len)});
      x.parking = true;
    } else {
      check_header(d, x);
    }
  } else {
    x.got += static_cast<std::size_t>(k);
  }
  if (x.parking && x.got == x.rh.len) {  // parked whole: read the next header
    x.parking = false;
    x.hgot = x.got = 0;
  }
  x.recv_done = !x.parking && x.hgot == sizeof x.rh && x.got == x.rlen;
  return true;
}

void Channel::give_up(const OpDesc& d, const Xfer& x) const {
  failures_.give_up(d, !x.send_done && x.sent > 0 ? x.to : -1);
}

void Channel::check_header(const OpDesc& d, const Xfer& x) const {
  const WireHeader& rh = x.rh;
  if (rh.magic == kWireMagic && rh.channel == kGiveUp) {
    give_up(d, x);
    failures_.peer_failed(d.text(), x.from, fmt::format("gave up on call #{}", rh.seq), true);
  }
  if (rh.magic != kWireMagic || rh.channel != kCollective)
    throw CollError(DTRAIN_ERR_INTERNAL, fmt::format("{}: corrupt stream from {}", d.text(), links_.text(x.from)));
  if (rh.seq == d.seq && rh.fp0 == d.fp0() && rh.fp1 == d.fp1() && rh.len == x.rlen) return;
  give_up(d, x);
  throw CollError(DTRAIN_ERR_MISMATCH,
                  fmt::format("mismatched collective calls at call #{} (every rank must make the same calls "
                              "with the same count, dtype, op and root): rank {}: {} #{}; rank {}: {} #{}",
                              d.seq, links_.world(links_.rank()), describe_fingerprint(d.fp0(), d.fp1()), d.seq,
                              links_.world(x.from), describe_fingerprint(rh.fp0, rh.fp1), rh.seq));
}

}  // namespace dtrain::coll::tcp
