// TcpStore: blocking POSIX socket client with poll() deadlines.
#include "dtrain/rendezvous/store/client.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/net.hpp"
#include "dtrain/common/log.hpp"
#include "dtrain/rendezvous/store/auth.hpp"

namespace dtrain::rdzv {
namespace {

using Clock = std::chrono::steady_clock;
using wire::Frame;
using wire::Op;

// A round trip of an op that never blocks at the server; generous for loaded machines.
constexpr milliseconds kOpTimeout{60000};
// Extra wait beyond a server-side timeout before we call the server unresponsive.
constexpr milliseconds kReplyGrace{15000};

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return left > 1000000000 ? 1000000000 : int(left);
}

std::string sockaddr_text(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET)
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof buf);
  else if (sa->sa_family == AF_INET6)
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof buf);
  return buf;
}

void check_key(std::string_view key) {
  if (key.empty()) throw ConfigError("store key is empty");
  if (key.size() > wire::kMaxKey)
    throw ConfigError(fmt::format("store key of {} bytes exceeds the {}-byte limit", key.size(), wire::kMaxKey));
}

void check_value(std::string_view key, std::size_t n) {
  if (n > wire::kMaxValue)
    throw ConfigError(fmt::format("store value for '{}' of {} bytes exceeds the {}-byte limit", key, n, wire::kMaxValue));
}

std::int64_t clamp_ms(milliseconds t) { return t.count() < 0 ? 0 : t.count(); }

// poll() for `events` on fd until the deadline, also watching a Canceller's fd (-1: none).
// 1: ready; 0: the deadline passed; -1: cancelled; errors other than EINTR count as ready (the
// following send/recv/getsockopt reports them).
int poll_until(int fd, short events, int cancel_fd, Clock::time_point deadline) {
  pollfd p[2] = {{fd, events, 0}, {cancel_fd, POLLIN, 0}};
  for (;;) {
    int rc = ::poll(p, cancel_fd >= 0 ? 2 : 1, remaining_ms(deadline));
    if (rc < 0 && errno == EINTR) continue;
    if (cancel_fd >= 0 && p[1].revents != 0) return -1;
    return rc == 0 ? 0 : 1;
  }
}

// One connect attempt to one address, non-blocking with a deadline. Returns fd or -1 with errno;
// -1 with errno ECANCELED when cancel_fd became readable.
int try_connect(const addrinfo* ai, Clock::time_point deadline, int cancel_fd) {
  int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
  if (fd < 0) return -1;
  if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) return fd;
  if (errno != EINPROGRESS) {
    int e = errno;
    ::close(fd);
    errno = e;
    return -1;
  }
  int rc = poll_until(fd, POLLOUT, cancel_fd, deadline);
  if (rc <= 0) {
    ::close(fd);
    errno = rc == 0 ? ETIMEDOUT : ECANCELED;
    return -1;
  }
  int err = 0;
  socklen_t len = sizeof err;
  ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) {
    ::close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

}  // namespace

[[noreturn]] void throw_error_reply(const Frame& reply, std::string_view where) {
  auto code = wire::ErrorCode(reply.args.size() > 0 ? reply.i64_at(0) : 0);
  std::string msg = reply.args.size() > 1 ? std::string(reply.str_at(1)) : std::string("(no message)");
  std::string what = fmt::format("{}: {}", where, msg);
  switch (code) {
    case wire::ErrorCode::auth: throw AuthError(what);
    case wire::ErrorCode::timeout: throw TimeoutError(what);
    case wire::ErrorCode::limit: throw ConfigError(what);
    case wire::ErrorCode::duplicate_rank:
    case wire::ErrorCode::too_many_nodes:
    case wire::ErrorCode::spec_mismatch: throw JoinError(code, what);
    case wire::ErrorCode::moved:
      if (reply.args.size() > 2) throw Moved(reply.i64_at(2), what);
      throw IoError(what);
    default: throw IoError(what);
  }
}

Canceller::Canceller() : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (fd_ < 0) throw IoError(fmt::format("eventfd: {}", errno_text(errno)));
}

Canceller::~Canceller() { ::close(fd_); }

void Canceller::raise() noexcept {
  if (raised_.exchange(true)) return;
  std::uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(fd_, &one, sizeof one);
}

TcpStore::TcpStore(ClientOptions opts) : opts_(std::move(opts)) {}

bool TcpStore::wait_ready(short events, Clock::time_point deadline) {
  int rc = poll_until(fd_, events, cancel_fd_, deadline);
  if (rc < 0) throw Cancelled(fmt::format("rendezvous {}: connect cancelled", endpoint()));
  return rc > 0;
}

TcpStore::~TcpStore() {
  if (fd_ >= 0) ::close(fd_);
}

std::string TcpStore::endpoint() const {
  return net::endpoint_text(opts_.host, opts_.port);
}

std::string TcpStore::local_address() const { return local_addr_; }

void TcpStore::close() {
  closed_.store(true);
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

void TcpStore::send_frame(const Frame& f, Clock::time_point deadline) {
  Bytes out;
  try {
    wire::encode(f, out);
  } catch (const wire::ProtocolError& e) {
    throw ConfigError(fmt::format("rendezvous {}: {}", endpoint(), e.what()));
  }
  std::size_t done = 0;
  while (done < out.size()) {
    if (closed_.load()) throw IoError(fmt::format("rendezvous {}: connection closed", endpoint()));
    ssize_t n = ::send(fd_, out.data() + done, out.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += std::size_t(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_ready(POLLOUT, deadline))
        throw IoError(fmt::format("rendezvous {}: send of a {} request stalled (server not reading)", endpoint(),
                                  wire::op_name(f.op)));
      continue;
    }
    peer_closed_ = errno == EPIPE || errno == ECONNRESET;
    throw IoError(fmt::format("rendezvous {}: send failed: {}", endpoint(), errno_text(errno)));
  }
}

Frame TcpStore::recv_frame(Clock::time_point deadline) {
  std::uint8_t buf[65536];
  for (;;) {
    try {
      if (auto f = decoder_.next()) return std::move(*f);
    } catch (const wire::ProtocolError& e) {
      throw IoError(fmt::format("rendezvous {}: bad reply: {}", endpoint(), e.what()));
    }
    if (closed_.load()) throw IoError(fmt::format("rendezvous {}: connection closed", endpoint()));
    if (!wait_ready(POLLIN, deadline))
      throw IoError(fmt::format("rendezvous {}: no reply within the deadline (server stalled?)", endpoint()));
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR && errno != EWOULDBLOCK)) {
      peer_closed_ = n == 0 || errno == ECONNRESET;
      throw IoError(fmt::format("rendezvous {}: the server closed the connection{}", endpoint(),
                                n < 0 ? ": " + errno_text(errno) : std::string()));
    }
    if (n < 0) continue;
    try {
      decoder_.feed(buf, std::size_t(n));
    } catch (const wire::ProtocolError& e) {
      throw IoError(fmt::format("rendezvous {}: bad reply: {}", endpoint(), e.what()));
    }
  }
}

Frame TcpStore::call(const Frame& request, milliseconds reply_timeout,
                     const std::function<void(const Frame&)>& progress) {
  std::lock_guard lock(mu_);
  if (fd_ < 0 || closed_.load()) throw IoError(fmt::format("rendezvous {}: connection closed", endpoint()));
  auto deadline = Clock::now() + reply_timeout;
  send_frame(request, Clock::now() + kOpTimeout);
  for (;;) {
    Frame reply = recv_frame(deadline);
    if (reply.op == Op::progress) {
      if (progress) progress(reply);
      continue;
    }
    if (reply.op == Op::error) throw_error_reply(reply, fmt::format("rendezvous {} {}", endpoint(), wire::op_name(request.op)));
    if (reply.op != Op::ok && reply.op != Op::value)
      throw IoError(fmt::format("rendezvous {}: unexpected {} reply to {}", endpoint(), wire::op_name(reply.op),
                                wire::op_name(request.op)));
    return reply;
  }
}

void TcpStore::handshake() {
  auto deadline = Clock::now() + kOpTimeout;
  Bytes cnonce = auth::random_nonce();
  send_frame(Frame(Op::hello)
                 .str("dtrain-rdzv")
                 .str(opts_.client_name)
                 .str(opts_.run_id)
                 .i64(opts_.generation)
                 .bytes(cnonce)
                 .i64(opts_.token.empty() ? 0 : 1),
             deadline);
  Frame ch = recv_frame(deadline);
  if (ch.op == Op::error) throw_error_reply(ch, fmt::format("rendezvous {} refused us", endpoint()));
  if (ch.op != Op::challenge)
    throw IoError(fmt::format("rendezvous {}: expected a challenge, got {}", endpoint(), wire::op_name(ch.op)));
  try {
    Bytes snonce(ch.bytes_at(0).begin(), ch.bytes_at(0).end());
    bool required = ch.i64_at(1) != 0;
    Bytes cproof;
    if (!opts_.token.empty()) {
      if (!required)
        throw AuthError(fmt::format(
            "rendezvous {} does not use a token but we were given one; refusing to trust it (start the server "
            "with the same --token-file, or drop the token for a loopback-only standalone store)",
            endpoint()));
      cproof = auth::proof(opts_.token, "client", snonce, cnonce, opts_.run_id, opts_.generation);
    }
    // We prove first; the server answers with its proof only once it has checked ours.
    send_frame(Frame(Op::auth).bytes(cproof), deadline);
    Frame w = recv_frame(deadline);
    if (w.op == Op::error) throw_error_reply(w, fmt::format("rendezvous {} refused us", endpoint()));
    if (w.op != Op::welcome)
      throw IoError(fmt::format("rendezvous {}: expected welcome, got {}", endpoint(), wire::op_name(w.op)));
    if (!opts_.token.empty()) {
      Bytes expect = auth::proof(opts_.token, "server", cnonce, snonce, opts_.run_id, opts_.generation);
      if (!auth::constant_time_equal(expect, w.bytes_at(1)))
        throw AuthError(fmt::format("rendezvous {} could not prove the shared token (token mismatch); refusing it",
                                    endpoint()));
    }
  } catch (const wire::ProtocolError& e) {
    throw IoError(fmt::format("rendezvous {}: bad handshake: {}", endpoint(), e.what()));
  }
}

// One TCP connection attempt per address of the host; false (and why in last_error) when none connects.
bool TcpStore::open_socket(Clock::time_point deadline, std::string& last_error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::string port = std::to_string(opts_.port);
  int g = ::getaddrinfo(opts_.host.c_str(), port.c_str(), &hints, &res);
  if (g != 0) {
    unknown_name_ = g == EAI_NONAME || g == EAI_FAIL;
    last_error = fmt::format("the name '{}' {}{}: {}", opts_.host, kDoesNotResolve, unknown_name_ ? "" : " (yet)",
                             g == EAI_SYSTEM ? errno_text(errno) : ::gai_strerror(g));
    return false;
  }
  for (addrinfo* ai = res; ai != nullptr && fd_ < 0; ai = ai->ai_next) {
    fd_ = try_connect(ai, deadline, cancel_fd_);
    if (fd_ >= 0) break;
    if (errno == ECANCELED) {
      ::freeaddrinfo(res);
      throw Cancelled(fmt::format("rendezvous {}: connect cancelled", endpoint()));
    }
    last_error = errno_text(errno);
  }
  ::freeaddrinfo(res);
  if (fd_ < 0) return false;
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len) == 0)
    local_addr_ = sockaddr_text(reinterpret_cast<sockaddr*>(&ss));
  return true;
}

// Retries, until connect_timeout, a refused connection (node 0 may still be starting its server)
// and one the server closed before the handshake finished (it sheds unauthenticated connections
// when flooded); a refusal of our token or run id, or a peer that does not speak the protocol,
// fails at once.
std::unique_ptr<TcpStore> connect_store(const ClientOptions& opts) {
  if (opts.host.empty() || opts.port <= 0 || opts.port > 65535)
    throw ConfigError(fmt::format("rendezvous address '{}:{}' is not HOST:PORT", opts.host, opts.port));
  const auto began = Clock::now();
  auto deadline = began + opts.connect_timeout;
  milliseconds backoff{50};
  std::string last_error;
  const int cancel_fd = opts.cancel ? opts.cancel->fd() : -1;
  for (;;) {
    std::unique_ptr<TcpStore> s(new TcpStore(opts));
    s->cancel_fd_ = cancel_fd;
    auto cancelled = [&] { return Cancelled(fmt::format("rendezvous {}: connect cancelled", s->endpoint())); };
    if (opts.cancel && opts.cancel->raised()) throw cancelled();
    if (s->open_socket(deadline, last_error)) {
      try {
        s->handshake();
        s->cancel_fd_ = -1;  // connected: from here on TcpStore::close() breaks a blocked call
        DTRAIN_DEBUG(rdzv, "connected to rendezvous {} as '{}' (run '{}', generation {}, local address {})",
                     s->endpoint(), opts.client_name, opts.run_id, opts.generation, s->local_addr_);
        return s;
      } catch (const IoError& e) {
        if (!s->peer_closed_) throw;
        last_error = fmt::format("the server closed the connection during the handshake ({})", e.what());
      }
    }
    if (opts.on_retry) opts.on_retry(std::chrono::duration_cast<milliseconds>(Clock::now() - began), last_error);
    if (s->unknown_name_ && Clock::now() - began >= std::min(opts.resolve_grace, opts.connect_timeout))
      throw ConfigError(fmt::format("rendezvous {}: {} (tried for {} s); check the host name (MASTER_ADDR, --rdzv, "
                                    "rendezvous.endpoint) and this host's resolver",
                                    s->endpoint(), last_error,
                                    std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - began).count()));
    if (Clock::now() + backoff >= deadline)
      throw IoError(fmt::format("cannot reach the rendezvous at {} within {} ms: {}; is the store (node 0's agent or "
                                "`dtrain rendezvous serve`) running there?",
                                s->endpoint(), opts.connect_timeout.count(), last_error));
    if (cancel_fd >= 0) {
      if (poll_until(cancel_fd, POLLIN, -1, Clock::now() + backoff) != 0) throw cancelled();
    } else {
      std::this_thread::sleep_for(backoff);
    }
    backoff = std::min(backoff * 2, milliseconds(1000));
  }
}

void TcpStore::set(std::string_view key, ByteView value) {
  check_key(key);
  check_value(key, value.size());
  call(Frame(Op::set).str(key).bytes(value), kOpTimeout);
}

Bytes TcpStore::get(std::string_view key, milliseconds timeout) {
  check_key(key);
  Frame r = call(Frame(Op::get).str(key).i64(clamp_ms(timeout)), timeout + kReplyGrace);
  auto v = r.bytes_at(0);
  return Bytes(v.begin(), v.end());
}

std::int64_t TcpStore::add(std::string_view key, std::int64_t delta) {
  check_key(key);
  return call(Frame(Op::add).str(key).i64(delta), kOpTimeout).i64_at(0);
}

Bytes TcpStore::compare_set(std::string_view key, ByteView expected, ByteView desired) {
  check_key(key);
  check_value(key, desired.size());
  check_value(key, expected.size());
  Frame r = call(Frame(Op::compare_set).str(key).bytes(expected).bytes(desired), kOpTimeout);
  auto v = r.bytes_at(0);
  return Bytes(v.begin(), v.end());
}

bool TcpStore::check(std::span<const std::string> keys) {
  Frame f(Op::check);
  for (const auto& k : keys) {
    check_key(k);
    f.str(k);
  }
  return call(f, kOpTimeout).i64_at(0) != 0;
}

bool TcpStore::erase(std::string_view key) {
  check_key(key);
  return call(Frame(Op::erase).str(key), kOpTimeout).i64_at(0) != 0;
}

void TcpStore::barrier(std::string_view name, int count, milliseconds timeout) {
  check_key(name);
  if (count < 1) throw ConfigError(fmt::format("barrier '{}': count {} must be at least 1", name, count));
  call(Frame(Op::barrier).str(name).i64(count).i64(clamp_ms(timeout)), timeout + kReplyGrace);
}

}  // namespace dtrain::rdzv
