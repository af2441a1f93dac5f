#pragma once
// TcpStore: the client of the rendezvous server (server/server.hpp), one TCP connection, blocking POSIX
// sockets with deadlines. Used by the agent and by the collectives library, so it depends on
// dtrain::common (and OpenSSL's libcrypto, which auth.cpp loads on the first HMAC) only.
//
// connect_store() connects (retrying "connection refused" until connect_timeout, since node 0 may
// still be starting its server, and a connection the server closed during the handshake, since a
// flooded server sheds unauthenticated connections), performs the handshake (run id, generation,
// mutual HMAC proof of the token, ours first) and returns a store whose keys the server scopes by
// (run_id, generation).
//
// Threading: every call holds one per-connection mutex for its whole round trip, so a TcpStore may be
// shared by threads, but a blocking get()/barrier() holds back the other callers of the same object.
// Open a second TcpStore for a watcher that blocks.
//
// Errors: AuthError (refused: wrong token, no token, wrong run id - the message names the reason),
// TimeoutError (a get or barrier passed its timeout), IoError (connect failed, server gone, protocol
// violation), ConfigError (a key or value over the wire limits, see wire.hpp), Cancelled (another
// thread raised the Canceller of ClientOptions while connect_store() was still connecting).
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "dtrain/common/errors.hpp"
#include "dtrain/rendezvous/store/store.hpp"
#include "dtrain/rendezvous/store/wire.hpp"

namespace dtrain::rdzv {

// Lets another thread abandon connect_store() while it retries a refused connection, waits for a
// silent host or runs the handshake (NodeSession::cancel_join). One-shot: once raised it stays so.
// Only the connect phase polls it; a connected store is broken with TcpStore::close().
class Canceller {
 public:
  Canceller();  // throws IoError when no eventfd can be made
  ~Canceller();
  Canceller(const Canceller&) = delete;
  Canceller& operator=(const Canceller&) = delete;
  void raise() noexcept;  // thread-safe, idempotent
  bool raised() const noexcept { return raised_.load(); }
  int fd() const noexcept { return fd_; }  // readable once raised (for poll)

 private:
  int fd_ = -1;
  std::atomic<bool> raised_{false};
};

// The connect was abandoned through a Canceller (not a network failure).
class Cancelled : public IoError {
 public:
  using IoError::IoError;
};

struct ClientOptions {
  std::string host;
  int port = 0;
  std::string token;    // empty: no token (only a tokenless, loopback-only server accepts it)
  std::string run_id;
  int generation = 0;
  std::chrono::milliseconds connect_timeout{30000};
  // How long a host name the resolver definitively does not know (EAI_NONAME, EAI_FAIL) is tried
  // again (a peer's name may be published a little late) before connect_store() gives up with a
  // ConfigError; a temporary failure (EAI_AGAIN) is retried until connect_timeout.
  std::chrono::milliseconds resolve_grace{10000};
  std::string client_name;  // shown in server logs, e.g. "agent node 1" or "rank 3"
  std::shared_ptr<Canceller> cancel;  // optional: raised elsewhere, connect_store() throws Cancelled
  // optional: called (on the connecting thread) after each attempt that found nothing to connect
  // to, with the time since connect_store() began and why ("Connection refused", or a why that
  // contains kDoesNotResolve)
  std::function<void(std::chrono::milliseconds elapsed, const std::string& why)> on_retry;
};

// In the `why` of a connect attempt whose host name did not resolve.
inline constexpr std::string_view kDoesNotResolve = "does not resolve";

class TcpStore : public Store {
 public:
  ~TcpStore() override;
  TcpStore(const TcpStore&) = delete;
  TcpStore& operator=(const TcpStore&) = delete;

  void set(std::string_view key, ByteView value) override;
  Bytes get(std::string_view key, milliseconds timeout) override;
  std::int64_t add(std::string_view key, std::int64_t delta) override;
  Bytes compare_set(std::string_view key, ByteView expected, ByteView desired) override;
  bool check(std::span<const std::string> keys) override;
  bool erase(std::string_view key) override;
  void barrier(std::string_view name, int count, milliseconds timeout) override;

  // Our IP address on this connection (getsockname), e.g. "10.0.0.2": the interface that reaches
  // the store, which workers advertise for the TCP engine.
  std::string local_address() const;
  // The server's address as "host:port" (for messages).
  std::string endpoint() const;
  const ClientOptions& options() const { return opts_; }

  // Low level, for node_session.hpp and `dtrain status`: sends one request frame and waits up to
  // `reply_timeout` for its final reply; `progress` (may be empty) sees intermediate progress
  // frames. An error reply is thrown as the matching exception (see error_from()).
  wire::Frame call(const wire::Frame& request, milliseconds reply_timeout,
                   const std::function<void(const wire::Frame&)>& progress = {});
  // Closes the socket; later calls throw IoError. Safe from another thread to break a blocked call.
  void close();

 private:
  friend std::unique_ptr<TcpStore> connect_store(const ClientOptions&);
  explicit TcpStore(ClientOptions opts);
  bool open_socket(std::chrono::steady_clock::time_point deadline, std::string& last_error);
  void handshake();
  void send_frame(const wire::Frame& f, std::chrono::steady_clock::time_point deadline);
  wire::Frame recv_frame(std::chrono::steady_clock::time_point deadline);
  // poll() on fd_ until ready (true) or the deadline (false); throws Cancelled while connecting.
  bool wait_ready(short events, std::chrono::steady_clock::time_point deadline);

  ClientOptions opts_;
  int fd_ = -1;
  int cancel_fd_ = -1;  // the Canceller's fd while connect_store() runs, else -1
  std::mutex mu_;
  std::atomic<bool> closed_{false};
  bool peer_closed_ = false;  // the server closed or reset the connection (retried in the handshake)
  bool unknown_name_ = false;  // the resolver said the host name does not exist (open_socket)
  wire::Decoder decoder_;
  std::string local_addr_;
};

std::unique_ptr<TcpStore> connect_store(const ClientOptions& opts);

// A join refused for a reason the user must fix: duplicate node rank, too many nodes, specs that
// differ between nodes (code says which). A ConfigError, so the CLI exits 2.
class JoinError : public ConfigError {
 public:
  JoinError(wire::ErrorCode c, const std::string& what) : ConfigError(what), code(c) {}
  wire::ErrorCode code;
};

// An elastic job's rendezvous sends a joining node to another generation (the one gathering nodes).
class Moved : public IoError {
 public:
  Moved(std::int64_t g, const std::string& what) : IoError(what), generation(g) {}
  std::int64_t generation;
};

// Throws the exception for an error reply frame (code -> AuthError, TimeoutError, ConfigError for
// join conflicts and limits, Moved, IoError otherwise); `where` prefixes the message.
[[noreturn]] void throw_error_reply(const wire::Frame& reply, std::string_view where);

}  // namespace dtrain::rdzv
