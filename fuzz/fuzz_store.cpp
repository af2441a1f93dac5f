// libFuzzer target: the rendezvous server's command handling, end to end but for the listening
// socket: a real ServerState on a libuv loop and three connections over socket pairs. Two of them finish a
// (tokenless) handshake in one scope first, so the input reaches the store, barrier, join, event
// and status handlers, and their interplay; the third gets the input raw, before any handshake.
//
// Input: records of [connection selector byte][u16 length][that many bytes], each fed to the
// connection as if read() had returned it. After every record the loop runs once; at the end every
// connection is closed and the loop must run dry (no handle left behind, no leak).
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "dtrain/common/log.hpp"
#include "dtrain/rendezvous/store/auth.hpp"
#include "connection.hpp"
#include "handlers.hpp"
#include "server_state.hpp"

using namespace dtrain::rdzv;
using wire::Frame;
using wire::Op;

namespace {

uv_loop_t* loop() {
  static uv_loop_t* l = [] {
    auto* x = new uv_loop_t;
    uv_loop_init(x);
    dtrain::log::set_level(dtrain::log::Level::error);  // drop warnings are expected, by the thousand
    return x;
  }();
  return l;
}

ServerOptions options() {
  ServerOptions o;
  o.max_keys_per_run = 64;
  o.max_bytes_per_run = 1 << 16;
  o.max_keys_total = 100;
  o.max_bytes_total = 1 << 17;
  o.max_pending = 2;
  return o;
}

// Reads and discards what the server wrote to our end of a pair.
void drain(int fd) {
  char buf[65536];
  while (::recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0) {
  }
}

// Feeds bytes as the read callback does: a malformed frame drops the peer.
void feed(srv::Conn* c, const std::uint8_t* data, std::size_t n) {
  if (c == nullptr || c->closing) return;
  try {
    srv::receive(*c, data, n);
  } catch (const wire::ProtocolError& e) {
    srv::drop(*c, e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  constexpr int kConns = 3;
  srv::ServerState server(options());
  server.loop = loop();
  server.max_conns = 16;
  srv::Conn* conns[kConns] = {};
  int ours[kConns] = {-1, -1, -1};
  for (int i = 0; i < kConns; ++i) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) std::abort();
    ours[i] = sv[1];
    conns[i] = srv::open_conn(server, sv[0]);
  }
  Bytes nonce(auth::kNonceBytes, 7);
  for (int i = 0; i < 2; ++i) {  // two clients through the handshake, same run and generation
    if (conns[i] == nullptr) std::abort();
    Bytes hello = wire::encode(Frame(Op::hello).str("dtrain-rdzv").str("fuzz").str("run").i64(0).bytes(nonce).i64(0));
    Bytes auth = wire::encode(Frame(Op::auth).bytes(Bytes{}));
    feed(conns[i], hello.data(), hello.size());
    feed(conns[i], auth.data(), auth.size());
  }
  // A closed connection leaves server.conns at once and is freed by a loop run, which may itself close
  // one (a parked wait's timer): after each run, forget every connection the server no longer holds.
  auto forget_closed = [&] {
    for (auto*& c : conns)
      if (c != nullptr && std::find(server.conns.begin(), server.conns.end(), c) == server.conns.end()) c = nullptr;
  };
  try {
    std::size_t pos = 0;
    while (pos + 3 <= size) {
      int which = data[pos] % kConns;
      std::size_t len = std::size_t(data[pos + 1]) << 8 | data[pos + 2];
      pos += 3;
      len = std::min(len, size - pos);
      feed(conns[which], data + pos, len);
      pos += len;
      for (int fd : ours) drain(fd);
      server.scopes.for_each([](srv::Scope& s) {  // what the server's tick does
        srv::send_join_progress(s, Clock::now() + std::chrono::seconds(2));
        srv::check_heartbeats(s, Clock::now());
      });
      srv::drain_pumps(server);
      uv_run(loop(), UV_RUN_NOWAIT);
      forget_closed();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_store: exception out of the handlers: %s\n", e.what());
    std::abort();
  }
  for (int i = 0; i < kConns; ++i) drain(ours[i]);
  auto all = server.conns;
  for (srv::Conn* c : all) srv::close_conn(*c);
  server.stopping = true;
  uv_run(loop(), UV_RUN_DEFAULT);  // close callbacks; must end: nothing may stay active
  for (int fd : ours) ::close(fd);
  if (!server.conns.empty() || !server.pending.empty()) std::abort();
  server.scopes.clear();
  return 0;
}
