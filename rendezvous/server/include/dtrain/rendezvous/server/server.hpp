#pragma once
// The rendezvous store server (libuv). One Server owns one libuv loop that runs on its own thread
// (every signal blocked there): start() binds and listens on the calling thread and returns once the
// socket listens (or throws), without waiting for the loop thread; stop() (any thread) wakes the loop through a
// uv_async_t, flushes pending replies, closes every handle and joins the thread. The destructor
// calls stop().
//
// It serves the store operations of store.hpp, scoped by the (run id, generation) each client named
// in its handshake, and the node coordination of node_session.hpp (join barrier with rank table,
// heartbeats and lost-node detection, failure reports, job events, exit barrier, status).
//
// Security: without a token the server binds loopback addresses only, unless `insecure`; it binds
// exactly the address asked for (never all interfaces unless asked), and refuses a token too short
// to hold 128 bits. A peer that sends garbage, oversize or truncated frames, stalls mid-frame past
// frame_timeout, or does not finish the handshake within handshake_timeout is dropped with a logged
// reason (rate-limited); everyone else is served. Before the handshake a peer may send at most
// wire::kMaxHandshakeFrame bytes a frame; past max_pending such peers the oldest is dropped, and at
// most max_connections (fewer when the open-files limit is lower) are open at once. Stored keys and
// bytes are bounded per run and for the whole server (docs/wire-protocol.md, "Limits").
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

namespace dtrain::rdzv {

// The store budget of one run id by default (the in-memory store's table has the same).
inline constexpr std::size_t kDefaultKeysPerRun = 200000;
inline constexpr std::size_t kDefaultBytesPerRun = 512u << 20;

struct ServerOptions {
  std::string host = "127.0.0.1";  // address to bind, exactly as given
  int port = 0;                    // 0: a free port, see Server::port()
  std::string token;               // shared token; empty: loopback only unless insecure
  bool insecure = false;           // allow a tokenless server on a non-loopback address
  std::string run_id;              // non-empty: refuse clients that name another run id
  std::size_t max_keys_per_run = kDefaultKeysPerRun;    // per run id, all its generations together
  std::size_t max_bytes_per_run = kDefaultBytesPerRun;  // keys + values + event texts, per run id
  std::size_t max_keys_total = 1000000;           // every run of this server together
  std::size_t max_bytes_total = 1u << 30;         // 1 GiB, every run of this server together
  std::size_t max_connections = 65536;            // open at once (lowered to fit RLIMIT_NOFILE)
  std::size_t max_pending = 1024;                 // in the handshake at once; the oldest makes room
  std::chrono::milliseconds frame_timeout{10000};      // a frame must arrive whole within this
  std::chrono::milliseconds handshake_timeout{10000};  // hello..auth must finish within this
  int backlog = 4096;
};

class Server {
 public:
  explicit Server(ServerOptions opts);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and listens, then starts the loop thread; returns once listening. Throws ConfigError for a refused
  // configuration (tokenless non-loopback address) and IoError when the address cannot be bound.
  // With `serve_now` false the thread is not started: connections wait in the listen backlog until
  // serve() (a store that many jobs never use need not cost a thread; listen_fd() becomes readable
  // when a client connects).
  void start(bool serve_now = true);
  // Starts the loop thread (once; after start()). Throws std::system_error when it cannot.
  void serve();
  // The listening socket (after start()), to watch for a first connection before serve().
  int listen_fd() const;
  // The bound port (valid after start()).
  int port() const;
  // "host:port" as bound.
  std::string endpoint() const;
  // Idempotent; safe from any thread except the server's own loop thread.
  void stop();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace dtrain::rdzv
