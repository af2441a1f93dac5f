// Connecting a group's sockets (bootstrap.hpp).
#include "bootstrap.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <fmt/format.h>

#include "dtrain/common/log.hpp"
#include "dtrain/common/params.hpp"
#include "dtrain/rendezvous/store/auth.hpp"
#include "dtrain/rendezvous/store/client.hpp"
#include "handshake.hpp"
#include "store_value.hpp"
#include "wire.hpp"

namespace dtrain::coll::tcp {
namespace {

namespace hs = handshake;

// How long an accepted connection may take to complete its handshake (a real peer needs a round
// trip), and how many unproven connections a listener holds at once (past that, the oldest goes).
constexpr std::chrono::seconds kHandshakeTimeout{10};
constexpr std::size_t kMaxUnproven = 64;

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

// "address:port" of a connected peer ("[address]:port" for IPv6), for the log.
std::string peer_address(int fd) {
  sockaddr_storage ss{};
  socklen_t sl = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &sl) != 0) return "an unknown address";
  const int port = ntohs(ss.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                                                 : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  if (ss.ss_family == AF_INET6) return fmt::format("[{}]:{}", numeric(ss), port);
  return fmt::format("{}:{}", numeric(ss), port);
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
    if (k == 0) {
      errno = ECONNRESET;  // the peer closed the connection
      return false;
    }
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

// Whether text is a numeric IPv4 or IPv6 address, as a rank publishes its own.
bool numeric_address(const char* text) {
  in6_addr a{};
  return ::inet_pton(AF_INET, text, &a) == 1 || ::inet_pton(AF_INET6, text, &a) == 1;
}

}  // namespace

std::string resolve_advertise_host(const std::string& configured, rdzv::Store* store) {
  std::string host = configured;
  if (host.empty()) host = param_string("DTRAIN_SOCKET_ADDR");
  if (host.empty())
    if (const char* v = std::getenv("DTRAIN_LOCAL_ADDR"); v != nullptr) host = v;
  if (host.empty())
    if (auto* ts = dynamic_cast<rdzv::TcpStore*>(store)) host = ts->local_address();
  if (host.empty()) host = "127.0.0.1";
  return host;
}

Bootstrap::Bootstrap(const Options& o) : o_(o), links_(o.members, o.rank) { listen_on(o.advertise_host); }

Bootstrap::~Bootstrap() {
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

Links Bootstrap::connect() {
  const auto deadline = Clock::now() + o_.timeout;
  read_addresses();
  connect_lower(deadline);
  accept_higher(deadline);
  DTRAIN_DEBUG(coll, "TCP engine: rank {} connected to {} peers", links_.world(links_.rank()), links_.size() - 1);
  return std::move(links_);
}

// Listens on the advertised address and publishes it (the listener exists before the record does).
void Bootstrap::listen_on(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), "0", &hints, &res); rc != 0)
    throw CollError(DTRAIN_ERR_CONFIG,
                    fmt::format("TCP engine: cannot resolve the address to advertise '{}' ({}); set DTRAIN_SOCKET_ADDR "
                                "to an address of this host",
                                host, ::gai_strerror(rc)));
  int err = 0;
  for (addrinfo* a = res; a != nullptr && listen_fd_ < 0; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      err = errno;
      continue;
    }
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, std::max(links_.size(), 16)) == 0) {
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
                                                   links_.world(links_.rank()), host, errno_text(err)));
  sockaddr_storage ss{};
  socklen_t sl = sizeof ss;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &sl);
  const int port = ntohs(ss.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                                                 : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  set_nonblocking(listen_fd_);
  const std::string me = fmt::format("{} {} {}", numeric(ss), port, host);
  if (links_.rank() == 0) {  // the secret is in the store before any address is
    secret_ = rdzv::auth::random_nonce();
    o_.store->set(o_.key_prefix + "tcp/secret", secret_);
  }
  o_.store->set(o_.key_prefix + "tcp/" + std::to_string(links_.rank()), rdzv::as_bytes(me));
}

// Everyone's address first (their listeners exist before they publish).
void Bootstrap::read_addresses() {
  for (int r = 0; r < links_.size(); ++r) {
    if (r == links_.rank()) continue;
    const std::string key = o_.key_prefix + "tcp/" + std::to_string(r);
    std::string v;
    try {
      v = rdzv::to_string(o_.store->get(key, o_.timeout));
    } catch (const TimeoutError&) {
      throw CollError(DTRAIN_ERR_TIMEOUT, fmt::format("TCP engine setup: rank {} never published its address within "
                                                      "{} (did it start and call init?)",
                                                      links_.world(r), seconds_text(o_.timeout)));
    }
    char addr[256] = {}, host[256] = {};
    int port = 0;
    if (std::sscanf(v.c_str(), "%255s %d %255s", addr, &port, host) < 2 || port < 1 || port > 65535 ||
        !numeric_address(addr))
      throw CollError(DTRAIN_ERR_PEER,
                      fmt::format("TCP engine setup: {}", junk_value_text(key, rdzv::as_bytes(v),
                                                                          fmt::format("rank {}'s address (\"IP PORT HOST\")",
                                                                                      links_.world(r)))));
    auto& p = links_.peer(r);
    p.addr = addr;
    p.port = port;
    p.host = host;
  }
  if (links_.rank() != 0) {  // rank 0 stored it before its address
    const std::string key = o_.key_prefix + "tcp/secret";
    secret_ = o_.store->get(key, o_.timeout);
    if (secret_.size() != hs::kSecretBytes)
      throw CollError(DTRAIN_ERR_PEER,
                      fmt::format("TCP engine setup: {}", junk_value_text(key, secret_,
                                                                          fmt::format("the {}-byte mesh secret of rank {}",
                                                                                      hs::kSecretBytes, links_.world(0)))));
  }
}

// The connecting side of the handshake on a fresh connection to rank r: ok, an I/O failure (the
// caller retries: the listener may have dropped a slow greeting), or refused (the listener failed
// its proof: `why`).
Bootstrap::Greet Bootstrap::greet(int fd, int r, Clock::time_point deadline, std::string& why) {
  hs::Connector c(secret_, links_.rank(), r, links_.size(), rdzv::auth::random_nonce());
  rdzv::Bytes hello = c.hello();
  if (!io_all(fd, hello.data(), hello.size(), true, deadline)) return Greet::io;
  while (c.want() > 0) {
    rdzv::Bytes msg(c.want());
    if (!io_all(fd, msg.data(), msg.size(), false, deadline)) return Greet::io;
    hs::Step s = c.take(msg);
    if (!s.error.empty()) {
      why = s.error;
      return Greet::refused;
    }
    if (!s.reply.empty() && !io_all(fd, s.reply.data(), s.reply.size(), true, deadline)) return Greet::io;
  }
  return Greet::ok;
}

void Bootstrap::connect_lower(Clock::time_point deadline) {
  for (int r = 0; r < links_.rank(); ++r) {
    auto& p = links_.peer(r);
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
        throw CollError(DTRAIN_ERR_CONFIG, fmt::format("TCP engine: rank {} cannot parse the address of {}",
                                                       links_.world(links_.rank()), links_.text(r)));
      int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
      int rc = fd < 0 ? -1 : ::connect(fd, res->ai_addr, res->ai_addrlen);
      err = errno;
      ::freeaddrinfo(res);
      if (rc == 0) {
        tune(fd);
        set_nonblocking(fd);
        std::string why;
        const Greet g = greet(fd, r, deadline, why);
        err = errno;
        if (g == Greet::ok) {
          p.fd = fd;
          break;
        }
        ::close(fd);
        fd = -1;
        if (g == Greet::refused)
          throw CollError(DTRAIN_ERR_PEER, fmt::format("TCP engine: rank {} could not greet {}: {}; is another "
                                                       "program listening on that port?",
                                                       links_.world(links_.rank()), links_.text(r), why));
      }
      if (fd >= 0) ::close(fd);
      if (Clock::now() >= deadline)
        throw CollError(DTRAIN_ERR_PEER,
                        fmt::format("TCP engine: rank {} cannot connect to {}: {} ({} attempts in {}); check that "
                                    "the address is reachable from this host or set DTRAIN_SOCKET_ADDR on that rank",
                                    links_.world(links_.rank()), links_.text(r), errno_text(err), attempts, seconds_text(o_.timeout)));
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(100, 5 * attempts)));
    }
  }
}

// ---- the accepting side ---------------------------------------------------------------------

// An accepted connection whose handshake is under way.
struct Bootstrap::Incoming {
  int fd = -1;
  std::string from;  // "address:port"
  Clock::time_point until;
  hs::Acceptor hs;
  rdzv::Bytes buf;
  std::size_t have = 0;
};

void Bootstrap::drop(Incoming& c, const std::string& why) {
  DTRAIN_WARN(coll, "TCP engine: rank {} dropped a connection from {}: {}", links_.world(links_.rank()), c.from, why);
  ::close(c.fd);
  c.fd = -1;
}

void Bootstrap::accept_new(std::vector<Incoming>& in) {
  for (;;) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    if (in.size() >= kMaxUnproven) {
      drop(in.front(), fmt::format("{} connections were waiting for their handshake; this one was the oldest",
                                   kMaxUnproven));
      in.erase(in.begin());
    }
    tune(fd);
    const auto until = Clock::now() + std::min<std::chrono::milliseconds>(kHandshakeTimeout, o_.timeout);
    in.push_back(Incoming{fd, peer_address(fd), until, hs::Acceptor(secret_, links_.rank(), links_.size(), rdzv::auth::random_nonce()),
                          rdzv::Bytes(hs::kHelloBytes), 0});
  }
}

// Reads what the connection sent and moves its handshake on; true once it is settled (bound to its
// rank or dropped, fd -1 then).
bool Bootstrap::advance(Incoming& c) {
  for (;;) {
    ssize_t k = ::recv(c.fd, c.buf.data() + c.have, c.buf.size() - c.have, 0);
    if (k == 0) {
      drop(c, fmt::format("it closed the connection during the handshake ({} bytes into a message)", c.have));
      return true;
    }
    if (k < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      drop(c, fmt::format("reading its handshake: {}", errno_text(errno)));
      return true;
    }
    c.have += static_cast<std::size_t>(k);
    if (c.have < c.buf.size()) continue;
    hs::Step s = c.hs.take(c.buf);
    if (!s.error.empty()) {
      drop(c, s.error);
      return true;
    }
    if (!s.reply.empty() && !io_all(c.fd, s.reply.data(), s.reply.size(), true, c.until)) {
      drop(c, fmt::format("answering its handshake: {}", errno_text(errno)));
      return true;
    }
    if (s.done) {
      auto& p = links_.peer(c.hs.peer());
      if (p.fd >= 0) {
        drop(c, fmt::format("rank {} is connected already", links_.world(c.hs.peer())));
        return true;
      }
      p.fd = c.fd;
      c.fd = -1;
      return true;
    }
    c.buf.assign(c.hs.want(), 0);
    c.have = 0;
  }
  if (Clock::now() >= c.until) {
    const auto limit = std::min<std::chrono::milliseconds>(kHandshakeTimeout, o_.timeout);
    drop(c, fmt::format("it did not complete the handshake within {}", seconds_text(limit)));
    return true;
  }
  return false;
}

void Bootstrap::accept_higher(Clock::time_point deadline) {
  std::vector<Incoming> in;
  auto missing = [&] {
    std::vector<int> m;
    for (int r = links_.rank() + 1; r < links_.size(); ++r)
      if (links_.peer(r).fd < 0) m.push_back(r);
    return m;
  };
  while (!missing().empty()) {
    if (Clock::now() >= deadline) {
      for (auto& c : in) drop(c, "the setup timed out during its handshake");
      std::string list;
      for (int r : missing()) list += fmt::format("{}{}", list.empty() ? "" : ", ", links_.world(r));
      throw CollError(DTRAIN_ERR_TIMEOUT, fmt::format("TCP engine setup: ranks [{}] did not connect to rank {} "
                                                      "within {}",
                                                      list, links_.world(links_.rank()), seconds_text(o_.timeout)));
    }
    std::vector<pollfd> pfds{{listen_fd_, POLLIN, 0}};
    for (const auto& c : in) pfds.push_back({c.fd, POLLIN, 0});
    ::poll(pfds.data(), pfds.size(), ms_left(deadline));
    std::erase_if(in, [&](Incoming& c) { return advance(c); });
    if (pfds[0].revents != 0) accept_new(in);
  }
  for (auto& c : in) drop(c, "it had not completed the handshake when every rank was connected");
  // Nobody else may connect: the listener goes.
  ::close(listen_fd_);
  listen_fd_ = -1;
}

}  // namespace dtrain::coll::tcp
