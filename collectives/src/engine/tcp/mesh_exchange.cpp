// TCP mesh exchange: the send and the receive of one step advance together on non-blocking sockets
// (sendmsg of header + payload, recv of header then payload), polling both when neither moves
// (without sleeping for the first spin_us_), until both are done or the call's deadline passes;
// stream() runs many such steps with one pair of peers pipelined (a send goes as soon as what it
// depends on has arrived, while receives go on). A point-to-point frame met on the way (the peer sent it before
// entering this collective) is read whole into the peer's inbox (mesh_p2p.cpp takes it from there)
// and the receive goes on with the next header. Failures: a broken or closed connection reports the
// root cause the peer recorded in the store (its status and message) when there is one; a timeout
// asks every rank through the store where it is and names who never reached the call.
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <thread>

#include <fmt/format.h>

#include "../../wait.hpp"
#include "mesh.hpp"

namespace dtrain::coll::tcp {
namespace {

bool transient(int err) { return err == EAGAIN || err == EWOULDBLOCK || err == EINTR; }

}  // namespace

// One exchange() in flight; sent counts over header + payload, hgot over the header being read, got
// over the payload (of the collective's message, or of the frame being parked).
struct Mesh::Xfer {
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

int ms_left(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 1000));
}

void Mesh::exchange(const OpDesc& d, int to, const void* sbuf, std::size_t slen, int from, void* rbuf,
                    std::size_t rlen) {
  Xfer x{.sh = WireHeader{kWireMagic, kCollective, d.seq, d.fp0(), d.fp1(), slen},
         .to = to,
         .from = from,
         .sfd = to >= 0 ? pairs_[static_cast<std::size_t>(to)].fd : -1,
         .rfd = from >= 0 ? pairs_[static_cast<std::size_t>(from)].fd : -1,
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
void Mesh::wait_for(const OpDesc& d, const Xfer& x) {
  pollfd pfd[2];
  int n = 0;
  if (!x.send_done) pfd[n++] = {x.sfd, POLLOUT, 0};
  if (!x.recv_done) pfd[n++] = {x.rfd, POLLIN, 0};
  if (Clock::now() >= d.deadline) fail_timeout(d, x.send_done ? -1 : x.to, x.recv_done ? -1 : x.from);
  if (spin_ready(pfd, n)) return;
  ::poll(pfd, static_cast<nfds_t>(n), ms_left(d.deadline));
}

// Polls without sleeping for up to spin_us_: true as soon as one of the sockets is ready. A peer on
// this host usually answers within microseconds, sooner than a rank sleeping in poll() wakes up;
// poll() rather than retrying recv(), which would contend for the socket's lock with the delivery.
bool Mesh::spin_ready(pollfd* pfd, int n) const {
  if (spin_us_ == 0) return false;
  const auto until = Clock::now() + std::chrono::microseconds(spin_us_);
  do {
    if (::poll(pfd, static_cast<nfds_t>(n), 0) > 0) return true;
    cpu_relax();
  } while (Clock::now() < until);
  return false;
}

void Mesh::stream(const OpDesc& d, int to, int from, const std::vector<Segment>& segs, std::size_t lead,
                  const std::function<void(std::size_t)>& on_recv) {
  const std::size_t n = segs.size();
  Xfer x{.sh = WireHeader{kWireMagic, kCollective, d.seq, d.fp0(), d.fp1(), 0},
         .to = to,
         .from = from,
         .sfd = pairs_[static_cast<std::size_t>(to)].fd,
         .rfd = pairs_[static_cast<std::size_t>(from)].fd,
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
bool Mesh::send_some(const OpDesc& d, Xfer& x) {
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
  if (k < 0 && !transient(errno))
    peer_failed(d.text(), x.to, fmt::format("connection broke while sending: {}", errno_text(errno)));
  return false;
}

// One recv: the rest of the header, or the rest of the payload once the header is in and checked
// (or of a point-to-point frame being parked).
bool Mesh::recv_some(const OpDesc& d, Xfer& x) {
  ssize_t k;
  if (x.hgot < sizeof x.rh)
    k = ::recv(x.rfd, reinterpret_cast<std::uint8_t*>(&x.rh) + x.hgot, sizeof x.rh - x.hgot, MSG_DONTWAIT);
  else if (x.parking)
    k = ::recv(x.rfd, inbox_[static_cast<std::size_t>(x.from)].back().payload.data() + x.got, x.rh.len - x.got,
               MSG_DONTWAIT);
  else
    k = ::recv(x.rfd, static_cast<std::uint8_t*>(x.rbuf) + x.got, x.rlen - x.got, MSG_DONTWAIT);
  if (k == 0) peer_failed(d.text(), x.from, "closed the connection (exited, failed, or destroyed its communicator)");
  if (k < 0) {
    if (!transient(errno))
      peer_failed(d.text(), x.from, fmt::format("connection broke while receiving: {}", errno_text(errno)));
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

void Mesh::check_header(const OpDesc& d, const Xfer& x) const {
  const WireHeader& rh = x.rh;
  if (rh.magic != kWireMagic || rh.channel != kCollective)
    throw CollError(DTRAIN_ERR_INTERNAL, fmt::format("{}: corrupt stream from {}", d.text(), peer_text(x.from)));
  if (rh.seq != d.seq || rh.fp0 != d.fp0() || rh.fp1 != d.fp1() || rh.len != x.rlen)
    throw CollError(DTRAIN_ERR_MISMATCH,
                    fmt::format("mismatched collective calls at call #{} (every rank must make the same calls "
                                "with the same count, dtype, op and root): rank {}: {} #{}; rank {}: {} #{}",
                                d.seq, world(rank_), describe_fingerprint(d.fp0(), d.fp1()), d.seq, world(x.from),
                                describe_fingerprint(rh.fp0, rh.fp1), rh.seq));
}

void Mesh::abort(dtrain_status_t status, const std::string& msg) noexcept {
  if (aborted_.exchange(true)) return;
  try {
    const std::string v = fmt::format("{} rank {}: {}", static_cast<int>(status), world(rank_), msg);
    store_->compare_set(prefix_ + "abort", {}, rdzv::as_bytes(v));
  } catch (...) {
  }
  for (auto& p : pairs_)
    if (p.fd >= 0) ::shutdown(p.fd, SHUT_RDWR);
}

void Mesh::peer_failed(const std::string& call, int peer, const std::string& what) {
  // The peer may have recorded why it gave up: report that root cause with its status.
  try {
    const std::string key = prefix_ + "abort";
    for (int i = 0; i < 20; ++i) {
      std::string keys[1] = {key};
      if (store_->check(keys)) {
        std::string v = rdzv::to_string(store_->get(key, std::chrono::milliseconds(1000)));
        int st = 0;
        int used = 0;
        std::sscanf(v.c_str(), "%d %n", &st, &used);
        auto status = st > 0 ? static_cast<dtrain_status_t>(st) : DTRAIN_ERR_PEER;
        throw CollError(status, fmt::format("{} on rank {}: {} failed: {}", call, world(rank_), peer_text(peer),
                                            v.substr(std::min(static_cast<std::size_t>(used), v.size()))));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  } catch (const CollError&) {
    throw;
  } catch (...) {
  }
  throw CollError(DTRAIN_ERR_PEER, fmt::format("{} on rank {}: {} {}", call, world(rank_), peer_text(peer), what));
}

void Mesh::fail_timeout(const OpDesc& d, int to, int from) {
  std::string waiting;
  if (from >= 0) waiting = fmt::format("waiting for data from {}", peer_text(from));
  if (to >= 0) waiting += fmt::format("{}waiting to send to {}", waiting.empty() ? "" : ", ", peer_text(to));
  // Ask everyone where they are: ranks stuck in the same call time out too and report here.
  std::string where;
  try {
    const std::string base = fmt::format("{}status/{}/", prefix_, d.seq);
    store_->set(base + std::to_string(rank_), rdzv::as_bytes(fmt::format("in {} ({})", d.text(), waiting)));
    const auto until = Clock::now() + std::min<std::chrono::milliseconds>(timeout_ / 4, std::chrono::seconds(2));
    std::vector<std::string> keys;
    for (int r = 0; r < size(); ++r) keys.push_back(base + std::to_string(r));
    while (Clock::now() < until && !store_->check(keys)) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (int r = 0; r < size(); ++r) {
      if (r == rank_) continue;
      std::string k[1] = {keys[static_cast<std::size_t>(r)]};
      if (store_->check(k))
        where += fmt::format("; rank {}: {}", world(r),
                             rdzv::to_string(store_->get(k[0], std::chrono::milliseconds(1000))));
      else
        where += fmt::format("; rank {}: no report (never reached call #{}, or dead)", world(r), d.seq);
    }
  } catch (...) {
  }
  throw CollError(DTRAIN_ERR_TIMEOUT, fmt::format("{} timed out after {} on rank {}, {}{}", d.text(),
                                                  seconds_text(d.timeout()), world(rank_), waiting, where));
}

}  // namespace dtrain::coll::tcp
