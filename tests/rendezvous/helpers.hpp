#pragma once
// Test helpers: a server on a free loopback port, and a raw socket for sending hand-made bytes.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>

#include "dtrain/rendezvous/store/auth.hpp"
#include "dtrain/rendezvous/store/client.hpp"
#include "dtrain/rendezvous/server/server.hpp"
#include "dtrain/rendezvous/store/wire.hpp"

namespace rt {

using namespace std::chrono_literals;
namespace rdzv = dtrain::rdzv;

struct TestServer {
  std::unique_ptr<rdzv::Server> server;
  explicit TestServer(rdzv::ServerOptions o = {}) : server(std::make_unique<rdzv::Server>(std::move(o))) {
    server->start();
  }
  int port() const { return server->port(); }
  rdzv::ClientOptions client(std::string run = "run1", int gen = 0, std::string token = {}) const {
    rdzv::ClientOptions c;
    c.host = "127.0.0.1";
    c.port = port();
    c.run_id = std::move(run);
    c.generation = gen;
    c.token = std::move(token);
    c.connect_timeout = 10s;
    c.client_name = "test";
    return c;
  }
  std::unique_ptr<rdzv::TcpStore> connect(std::string run = "run1", int gen = 0, std::string token = {}) const {
    return rdzv::connect_store(client(std::move(run), gen, std::move(token)));
  }
};

// A blocking raw TCP connection to 127.0.0.1:port.
struct RawConn {
  int fd = -1;
  rdzv::wire::Decoder dec;
  explicit RawConn(int port) {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(std::uint16_t(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ~RawConn() {
    if (fd >= 0) ::close(fd);
  }
  bool send_bytes(const rdzv::Bytes& b) { return ::send(fd, b.data(), b.size(), MSG_NOSIGNAL) == ssize_t(b.size()); }
  bool send_frame(const rdzv::wire::Frame& f) { return send_bytes(rdzv::wire::encode(f)); }
  // Waits for the server to close the connection: true when EOF (or reset) arrives within `t`.
  bool closed_within(std::chrono::milliseconds t) {
    auto deadline = std::chrono::steady_clock::now() + t;
    std::uint8_t buf[4096];
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, int(left.count())) <= 0) continue;
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return true;
    }
  }
  // Next frame within t, or nullopt.
  std::optional<rdzv::wire::Frame> recv_frame(std::chrono::milliseconds t) {
    auto deadline = std::chrono::steady_clock::now() + t;
    std::uint8_t buf[65536];
    for (;;) {
      if (auto f = dec.next()) return f;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, int(left.count())) <= 0) continue;
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return std::nullopt;
      dec.feed(buf, std::size_t(n));
    }
  }
  // Handshake with a tokenless server; true once welcomed.
  bool handshake(const std::string& run = "run1") {
    using rdzv::wire::Frame;
    using rdzv::wire::Op;
    send_frame(Frame(Op::hello).str("dtrain-rdzv").str("raw").str(run).i64(0).bytes(rdzv::auth::random_nonce()).i64(0));
    auto ch = recv_frame(std::chrono::milliseconds(10000));
    if (!ch || ch->op != Op::challenge) return false;
    send_frame(Frame(Op::auth).bytes(rdzv::Bytes{}));
    auto w = recv_frame(std::chrono::milliseconds(10000));
    return w && w->op == Op::welcome;
  }
};

}  // namespace rt
