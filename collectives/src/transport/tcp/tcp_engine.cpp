#include "tcp_engine.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "../../reduce.hpp"
#include "dtrain/common/log.hpp"

namespace dtrain::coll::tcp {
namespace {

constexpr std::uint32_t kHello = 0x6c6c6548;  // "Hell"
constexpr std::uint32_t kMsg = 0x3147534d;    // "MSG1"
constexpr std::size_t kSmallBytes = 64 * 1024;

struct WireHeader {
  std::uint32_t magic;
  std::uint32_t reserved;
  std::uint64_t seq;
  std::uint64_t fp0;
  std::uint64_t fp1;
  std::uint64_t len;
};
static_assert(sizeof(WireHeader) == 40);

struct Hello {
  std::uint32_t magic;
  std::int32_t rank;
  std::int32_t size;
  std::int32_t pad;
};

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

void tune(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

std::string numeric(const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET)
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, buf, sizeof buf);
  else
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr, buf, sizeof buf);
  return buf;
}

int ms_left(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 1000));
}

// Blocking-with-deadline read/write of whole buffers on a non-blocking socket (setup only).
bool io_all(int fd, void* buf, std::size_t len, bool write, Clock::time_point deadline) {
  auto* p = static_cast<std::uint8_t*>(buf);
  while (len > 0) {
    ssize_t k = write ? ::send(fd, p, len, MSG_NOSIGNAL) : ::recv(fd, p, len, 0);
    if (k > 0) {
      p += k;
      len -= static_cast<std::size_t>(k);
      continue;
    }
    if (k == 0) return false;
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
    if (Clock::now() >= deadline) {
      errno = ETIMEDOUT;
      return false;
    }
    pollfd pfd{fd, static_cast<short>(write ? POLLOUT : POLLIN), 0};
    ::poll(&pfd, 1, ms_left(deadline));
  }
  return true;
}

}  // namespace

Engine::Engine(const Options& o)
    : rank_(o.rank),
      size_(o.size),
      store_(o.store),
      prefix_(o.key_prefix),
      timeout_(o.timeout),
      chunk_bytes_(std::max<std::size_t>(o.chunk_bytes, 4096)),
      peers_(static_cast<std::size_t>(o.size)) {
  // Listen on the advertised address.
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(o.advertise_host.c_str(), "0", &hints, &res); rc != 0)
    throw CollError(DTRAIN_ERR_CONFIG,
                    fmt::format("TCP engine: cannot resolve the address to advertise '{}' ({}); set DTRAIN_SOCKET_ADDR "
                                "to an address of this host",
                                o.advertise_host, ::gai_strerror(rc)));
  int err = 0;
  for (addrinfo* a = res; a != nullptr && listen_fd_ < 0; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      err = errno;
      continue;
    }
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, std::max(size_, 16)) == 0) {
      listen_fd_ = fd;
    } else {
      err = errno;
      ::close(fd);
    }
  }
  ::freeaddrinfo(res);
  if (listen_fd_ < 0)
    throw CollError(DTRAIN_ERR_SYSTEM, fmt::format("TCP engine: rank {} cannot listen on {}: {}; set DTRAIN_SOCKET_ADDR "
                                                   "to an address of this host",
                                                   rank_, o.advertise_host, errno_text(err)));
  sockaddr_storage ss{};
  socklen_t sl = sizeof ss;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &sl);
  const int port = ntohs(ss.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                                                 : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  set_nonblocking(listen_fd_);
  const std::string me = fmt::format("{} {} {}", numeric(ss), port, o.advertise_host);
  store_->set(prefix_ + "tcp/" + std::to_string(rank_), rdzv::as_bytes(me));
  try {
    connect_all();
  } catch (...) {
    for (auto& p : peers_)
      if (p.fd >= 0) ::close(p.fd);
    ::close(listen_fd_);
    throw;
  }
}

Engine::~Engine() {
  for (auto& p : peers_)
    if (p.fd >= 0) ::close(p.fd);
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

std::string Engine::peer_text(int r) const {
  const Peer& p = peers_[static_cast<std::size_t>(r)];
  if (p.host == p.addr || p.host.empty()) return fmt::format("rank {} (address {}, port {})", r, p.addr, p.port);
  return fmt::format("rank {} (host {}, address {}, port {})", r, p.host, p.addr, p.port);
}

void Engine::connect_all() {
  const auto deadline = Clock::now() + timeout_;
  // Everyone's address first (their listeners exist before they publish).
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    std::string v;
    try {
      v = rdzv::to_string(store_->get(prefix_ + "tcp/" + std::to_string(r), timeout_));
    } catch (const TimeoutError&) {
      throw CollError(DTRAIN_ERR_TIMEOUT, fmt::format("TCP engine setup: rank {} never published its address within "
                                                      "{} (did it start and call init?)",
                                                      r, seconds_text(timeout_)));
    }
    char addr[256] = {}, host[256] = {};
    int port = 0;
    if (std::sscanf(v.c_str(), "%255s %d %255s", addr, &port, host) < 2)
      throw CollError(DTRAIN_ERR_INTERNAL, fmt::format("TCP engine: bad address record '{}' for rank {}", v, r));
    auto& p = peers_[static_cast<std::size_t>(r)];
    p.addr = addr;
    p.port = port;
    p.host = host;
  }
  // Connect to every lower rank.
  for (int r = 0; r < rank_; ++r) {
    auto& p = peers_[static_cast<std::size_t>(r)];
    int attempts = 0;
    int err = 0;
    for (;;) {
      ++attempts;
      addrinfo hints{};
      hints.ai_family = AF_UNSPEC;
      hints.ai_socktype = SOCK_STREAM;
      hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
      addrinfo* res = nullptr;
      if (::getaddrinfo(p.addr.c_str(), std::to_string(p.port).c_str(), &hints, &res) != 0 || res == nullptr)
        throw CollError(DTRAIN_ERR_CONFIG, fmt::format("TCP engine: rank {} cannot parse the address of {}", rank_,
                                                       peer_text(r)));
      int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
      int rc = fd < 0 ? -1 : ::connect(fd, res->ai_addr, res->ai_addrlen);
      err = errno;
      ::freeaddrinfo(res);
      if (rc == 0) {
        tune(fd);
        set_nonblocking(fd);
        Hello h{kHello, rank_, size_, 0};
        if (!io_all(fd, &h, sizeof h, true, deadline)) {
          err = errno;
          ::close(fd);
          throw CollError(DTRAIN_ERR_PEER, fmt::format("TCP engine: rank {} could not greet {}: {}", rank_,
                                                       peer_text(r), errno_text(err)));
        }
        p.fd = fd;
        break;
      }
      if (fd >= 0) ::close(fd);
      if (Clock::now() >= deadline)
        throw CollError(DTRAIN_ERR_PEER,
                        fmt::format("TCP engine: rank {} cannot connect to {}: {} ({} attempts in {}); check that "
                                    "the address is reachable from this host or set DTRAIN_SOCKET_ADDR on that rank",
                                    rank_, peer_text(r), errno_text(err), attempts, seconds_text(timeout_)));
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(100, 5 * attempts)));
    }
  }
  // Accept every higher rank.
  int pending = size_ - 1 - rank_;
  while (pending > 0) {
    pollfd pfd{listen_fd_, POLLIN, 0};
    ::poll(&pfd, 1, ms_left(deadline));
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (Clock::now() >= deadline) {
        std::string missing;
        for (int r = rank_ + 1; r < size_; ++r)
          if (peers_[static_cast<std::size_t>(r)].fd < 0) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", r);
        throw CollError(DTRAIN_ERR_TIMEOUT, fmt::format("TCP engine setup: ranks [{}] did not connect to rank {} "
                                                        "within {}",
                                                        missing, rank_, seconds_text(timeout_)));
      }
      continue;
    }
    tune(fd);
    Hello h{};
    if (!io_all(fd, &h, sizeof h, false, deadline) || h.magic != kHello || h.size != size_ || h.rank <= rank_ ||
        h.rank >= size_ || peers_[static_cast<std::size_t>(h.rank)].fd >= 0) {
      DTRAIN_WARN(coll, "TCP engine: rank {} dropped a connection with a bad greeting", rank_);
      ::close(fd);
      continue;
    }
    peers_[static_cast<std::size_t>(h.rank)].fd = fd;
    --pending;
  }
  DTRAIN_DEBUG(coll, "TCP engine: rank {} connected to {} peers", rank_, size_ - 1);
}

std::uint8_t* Engine::scratch(std::size_t bytes) {
  if (scratch_.size() < bytes) scratch_.resize(bytes);
  return scratch_.data();
}

void Engine::abort(dtrain_status_t status, const std::string& msg) noexcept {
  if (aborted_) return;
  aborted_ = true;
  try {
    const std::string v = fmt::format("{} rank {}: {}", static_cast<int>(status), rank_, msg);
    store_->compare_set(prefix_ + "abort", {}, rdzv::as_bytes(v));
  } catch (...) {
  }
  for (auto& p : peers_)
    if (p.fd >= 0) ::shutdown(p.fd, SHUT_RDWR);
}

void Engine::peer_failed(const OpDesc& d, int peer, const std::string& what) {
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
        throw CollError(status, fmt::format("{} on rank {}: {} failed: {}", d.text(), rank_,
                                            peer_text(peer), v.substr(std::min(static_cast<std::size_t>(used), v.size()))));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  } catch (const CollError&) {
    throw;
  } catch (...) {
  }
  throw CollError(DTRAIN_ERR_PEER, fmt::format("{} on rank {}: {} {}", d.text(), rank_, peer_text(peer), what));
}

void Engine::fail_timeout(const OpDesc& d, int to, int from) {
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
    for (int r = 0; r < size_; ++r) keys.push_back(base + std::to_string(r));
    while (Clock::now() < until && !store_->check(keys)) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      std::string k[1] = {keys[static_cast<std::size_t>(r)]};
      if (store_->check(k))
        where += fmt::format("; rank {}: {}", r,
                             rdzv::to_string(store_->get(k[0], std::chrono::milliseconds(1000))));
      else
        where += fmt::format("; rank {}: no report (never reached call #{}, or dead)", r, d.seq);
    }
  } catch (...) {
  }
  throw CollError(DTRAIN_ERR_TIMEOUT, fmt::format("{} timed out after {} on rank {}, {}{}", d.text(),
                                                  seconds_text(timeout_), rank_, waiting, where));
}

void Engine::exchange(const OpDesc& d, int to, const void* sbuf, std::size_t slen, int from, void* rbuf,
                      std::size_t rlen) {
  WireHeader sh{kMsg, 0, d.seq, d.fp0(), d.fp1(), slen};
  WireHeader rh{};
  std::size_t sent = 0, got = 0;  // counted over header + payload
  const std::size_t stotal = sizeof sh + slen, rtotal = sizeof rh + rlen;
  bool send_done = to < 0, recv_done = from < 0;
  const int sfd = to >= 0 ? peers_[static_cast<std::size_t>(to)].fd : -1;
  const int rfd = from >= 0 ? peers_[static_cast<std::size_t>(from)].fd : -1;
  if ((to >= 0 && sfd < 0) || (from >= 0 && rfd < 0))
    throw CollError(DTRAIN_ERR_ABORTED, fmt::format("{}: the communicator's connections are closed", d.text()));
  while (!send_done || !recv_done) {
    bool progress = false;
    if (!send_done) {
      iovec iov[2];
      int n = 0;
      if (sent < sizeof sh) {
        iov[n++] = {reinterpret_cast<std::uint8_t*>(&sh) + sent, sizeof sh - sent};
        if (slen) iov[n++] = {const_cast<void*>(sbuf), slen};
      } else {
        iov[n++] = {const_cast<std::uint8_t*>(static_cast<const std::uint8_t*>(sbuf)) + (sent - sizeof sh),
                    stotal - sent};
      }
      msghdr mh{};
      mh.msg_iov = iov;
      mh.msg_iovlen = static_cast<std::size_t>(n);
      ssize_t k = ::sendmsg(sfd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (k > 0) {
        sent += static_cast<std::size_t>(k);
        progress = true;
        send_done = sent == stotal;
      } else if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        peer_failed(d, to, fmt::format("connection broke while sending: {}", errno_text(errno)));
      }
    }
    if (!recv_done) {
      ssize_t k;
      if (got < sizeof rh)
        k = ::recv(rfd, reinterpret_cast<std::uint8_t*>(&rh) + got, sizeof rh - got, MSG_DONTWAIT);
      else
        k = ::recv(rfd, static_cast<std::uint8_t*>(rbuf) + (got - sizeof rh), rtotal - got, MSG_DONTWAIT);
      if (k > 0) {
        const bool had_header = got >= sizeof rh;
        got += static_cast<std::size_t>(k);
        progress = true;
        if (!had_header && got >= sizeof rh) {
          if (rh.magic != kMsg)
            throw CollError(DTRAIN_ERR_INTERNAL, fmt::format("{}: corrupt stream from {}", d.text(), peer_text(from)));
          if (rh.seq != d.seq || rh.fp0 != d.fp0() || rh.fp1 != d.fp1() || rh.len != rlen)
            throw CollError(DTRAIN_ERR_MISMATCH,
                            fmt::format("mismatched collective calls at call #{} (every rank must make the same calls "
                                        "with the same count, dtype, op and root): rank {}: {} #{}; rank {}: {} #{}",
                                        d.seq, rank_, describe_fingerprint(d.fp0(), d.fp1()), d.seq, from,
                                        describe_fingerprint(rh.fp0, rh.fp1), rh.seq));
        }
        recv_done = got == rtotal;
      } else if (k == 0) {
        peer_failed(d, from, "closed the connection (exited, failed, or destroyed its communicator)");
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        peer_failed(d, from, fmt::format("connection broke while receiving: {}", errno_text(errno)));
      }
    }
    if (progress || (send_done && recv_done)) continue;
    pollfd pfd[2];
    int n = 0;
    if (!send_done) pfd[n++] = {sfd, POLLOUT, 0};
    if (!recv_done) pfd[n++] = {rfd, POLLIN, 0};
    if (Clock::now() >= d.deadline) fail_timeout(d, send_done ? -1 : to, recv_done ? -1 : from);
    ::poll(pfd, static_cast<nfds_t>(n), ms_left(d.deadline));
  }
}

namespace {
int index_of(const Engine::Group& g, int rank) {
  auto it = std::find(g.begin(), g.end(), rank);
  DTRAIN_CHECK(it != g.end(), "rank {} not in its group", rank);
  return static_cast<int>(it - g.begin());
}
}  // namespace

void Engine::barrier(const OpDesc& d, const Group& g) { allreduce(d, g, nullptr, 0, DTRAIN_UINT8, DTRAIN_MAX, 1); }

void Engine::allreduce(const OpDesc& d, const Group& g, void* buf_v, std::size_t count, dtrain_dtype_t dtype,
                       dtrain_op_t op, int div) {
  const int n = static_cast<int>(g.size());
  const int idx = index_of(g, rank_);
  const std::size_t esz = dtype_size(dtype);
  const std::size_t bytes = count * esz;
  auto* buf = static_cast<std::uint8_t*>(buf_v);
  if (n == 1) {
    divide_in_place(buf, count, dtype, div);
    return;
  }
  if (bytes > kSmallBytes && count >= static_cast<std::size_t>(n)) {
    std::vector<std::size_t> starts(static_cast<std::size_t>(n) + 1);
    for (int b = 0; b <= n; ++b)
      starts[static_cast<std::size_t>(b)] = count * static_cast<std::size_t>(b) / static_cast<std::size_t>(n);
    ring_reduce_scatter(d, g, idx, buf, starts, esz, dtype, op, div);
    ring_allgather(d, g, idx, buf, starts, esz);
    return;
  }
  // Recursive doubling; ranks beyond the largest power of two fold into a partner first.
  int p = 1;
  while (p * 2 <= n) p *= 2;
  std::uint8_t* tmp = scratch(bytes);
  auto combine = [&](bool partner_lower) {
    const void* srcs[2] = {partner_lower ? static_cast<const void*>(tmp) : buf,
                           partner_lower ? static_cast<const void*>(buf) : tmp};
    reduce_n(srcs, 2, buf, nullptr, count, dtype, op, 1);
  };
  if (idx >= p) {
    exchange(d, g[static_cast<std::size_t>(idx - p)], buf, bytes, -1, nullptr, 0);
    exchange(d, -1, nullptr, 0, g[static_cast<std::size_t>(idx - p)], buf, bytes);
    return;
  }
  if (idx + p < n) {
    exchange(d, -1, nullptr, 0, g[static_cast<std::size_t>(idx + p)], tmp, bytes);
    combine(false);
  }
  for (int mask = 1; mask < p; mask <<= 1) {
    const int partner = idx ^ mask;
    exchange(d, g[static_cast<std::size_t>(partner)], buf, bytes, g[static_cast<std::size_t>(partner)], tmp, bytes);
    combine(partner < idx);
  }
  divide_in_place(buf, count, dtype, div);
  if (idx + p < n) exchange(d, g[static_cast<std::size_t>(idx + p)], buf, bytes, -1, nullptr, 0);
}

void Engine::ring_reduce_scatter(const OpDesc& d, const Group& g, int idx, std::uint8_t* buf,
                                 const std::vector<std::size_t>& starts, std::size_t esz, dtrain_dtype_t dtype,
                                 dtrain_op_t op, int div) {
  const int n = static_cast<int>(g.size());
  const int next = g[static_cast<std::size_t>((idx + 1) % n)];
  const int prev = g[static_cast<std::size_t>((idx + n - 1) % n)];
  const std::size_t chunk = std::max<std::size_t>(1, chunk_bytes_ / esz);
  std::uint8_t* tmp = scratch(chunk * esz);
  auto blen = [&](int b) { return starts[static_cast<std::size_t>(b) + 1] - starts[static_cast<std::size_t>(b)]; };
  // Every rank walks the same number of pieces per step (sized by the largest block), so sender and
  // receiver agree on each message even when block lengths differ by one element.
  std::size_t maxb = 0;
  for (int b = 0; b < n; ++b) maxb = std::max(maxb, blen(b));
  // Step s: send block (idx-s-1), receive block (idx-s-2) and fold it: after n-1 steps this rank
  // holds block idx reduced over every rank, in ring order starting at rank idx+1.
  for (int s = 0; s < n - 1; ++s) {
    const int sb = ((idx - s - 1) % n + n) % n;
    const int rb = ((idx - s - 2) % n + n) % n;
    const std::size_t slen = blen(sb), rlen = blen(rb);
    for (std::size_t off = 0; off < maxb; off += chunk) {
      const std::size_t sl = off < slen ? std::min(chunk, slen - off) : 0;
      const std::size_t rl = off < rlen ? std::min(chunk, rlen - off) : 0;
      exchange(d, next, buf + (starts[static_cast<std::size_t>(sb)] + off) * esz, sl * esz, prev, tmp, rl * esz);
      if (rl) {
        std::uint8_t* own = buf + (starts[static_cast<std::size_t>(rb)] + off) * esz;
        const void* srcs[2] = {tmp, own};
        reduce_n(srcs, 2, own, nullptr, rl, dtype, op, s == n - 2 ? div : 1);
      }
    }
  }
}

void Engine::ring_allgather(const OpDesc& d, const Group& g, int idx, std::uint8_t* buf,
                            const std::vector<std::size_t>& starts, std::size_t esz) {
  const int n = static_cast<int>(g.size());
  const int next = g[static_cast<std::size_t>((idx + 1) % n)];
  const int prev = g[static_cast<std::size_t>((idx + n - 1) % n)];
  const std::size_t chunk = std::max<std::size_t>(1, chunk_bytes_ / esz);
  auto blen = [&](int b) { return starts[static_cast<std::size_t>(b) + 1] - starts[static_cast<std::size_t>(b)]; };
  // Every rank walks the same number of pieces per step (sized by the largest block), so sender and
  // receiver agree on each message even when block lengths differ by one element.
  std::size_t maxb = 0;
  for (int b = 0; b < n; ++b) maxb = std::max(maxb, blen(b));
  for (int s = 0; s < n - 1; ++s) {
    const int sb = ((idx - s) % n + n) % n;
    const int rb = ((idx - s - 1) % n + n) % n;
    const std::size_t slen = blen(sb), rlen = blen(rb);
    for (std::size_t off = 0; off < maxb; off += chunk) {
      const std::size_t sl = off < slen ? std::min(chunk, slen - off) : 0;
      const std::size_t rl = off < rlen ? std::min(chunk, rlen - off) : 0;
      exchange(d, next, buf + (starts[static_cast<std::size_t>(sb)] + off) * esz, sl * esz, prev,
               buf + (starts[static_cast<std::size_t>(rb)] + off) * esz, rl * esz);
    }
  }
}

void Engine::broadcast(const OpDesc& d, const Group& g, void* buf_v, std::size_t bytes, int root) {
  const int n = static_cast<int>(g.size());
  if (n == 1) return;
  // Data flows only out of the root, so a rank with a different root or count might never hear of
  // the difference: agree on the fingerprint first (recursive doubling of empty messages).
  allreduce(d, g, nullptr, 0, DTRAIN_UINT8, DTRAIN_MAX, 1);
  const int idx = index_of(g, rank_);
  auto* buf = static_cast<std::uint8_t*>(buf_v);
  const int v = (idx - root + n) % n;
  auto rank_of = [&](int vv) { return g[static_cast<std::size_t>((vv + root) % n)]; };
  if (bytes <= kSmallBytes) {
    int mask = 1;
    while (mask < n) {
      if (v & mask) {
        exchange(d, -1, nullptr, 0, rank_of(v - mask), buf, bytes);
        break;
      }
      mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1)
      if (v + mask < n) exchange(d, rank_of(v + mask), buf, bytes, -1, nullptr, 0);
    return;
  }
  // Pipelined chain root -> root+1 -> ...: forward each chunk as soon as it arrives.
  for (std::size_t off = 0; off < bytes; off += chunk_bytes_) {
    const std::size_t len = std::min(chunk_bytes_, bytes - off);
    if (v > 0) exchange(d, -1, nullptr, 0, rank_of(v - 1), buf + off, len);
    if (v < n - 1) exchange(d, rank_of(v + 1), buf + off, len, -1, nullptr, 0);
  }
}

void Engine::allgather(const OpDesc& d, const Group& g, void* buf, std::size_t block_bytes) {
  const int n = static_cast<int>(g.size());
  if (n == 1) return;
  std::vector<std::size_t> starts(static_cast<std::size_t>(n) + 1);
  for (int b = 0; b <= n; ++b) starts[static_cast<std::size_t>(b)] = static_cast<std::size_t>(b) * block_bytes;
  ring_allgather(d, g, index_of(g, rank_), static_cast<std::uint8_t*>(buf), starts, 1);
}

void Engine::reduce_scatter(const OpDesc& d, const Group& g, void* buf, void* out, std::size_t block_count,
                            dtrain_dtype_t dtype, dtrain_op_t op, int div) {
  const int n = static_cast<int>(g.size());
  const int idx = index_of(g, rank_);
  const std::size_t esz = dtype_size(dtype);
  std::vector<std::size_t> starts(static_cast<std::size_t>(n) + 1);
  for (int b = 0; b <= n; ++b) starts[static_cast<std::size_t>(b)] = static_cast<std::size_t>(b) * block_count;
  if (n > 1) {
    ring_reduce_scatter(d, g, idx, static_cast<std::uint8_t*>(buf), starts, esz, dtype, op, div);
  } else {
    divide_in_place(buf, block_count, dtype, div);
  }
  if (block_count != 0)
    std::memmove(out, static_cast<std::uint8_t*>(buf) + starts[static_cast<std::size_t>(idx)] * esz, block_count * esz);
}

}  // namespace dtrain::coll::tcp
