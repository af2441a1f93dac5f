#include "connection.hpp"

#include <sys/socket.h>

#include "dispatch.hpp"
#include "dtrain/common/net.hpp"
#include "dtrain/common/log.hpp"
#include "server_state.hpp"
#include "scope.hpp"

namespace dtrain::rdzv::srv {

using wire::ErrorCode;
using wire::Frame;
using wire::Op;

namespace {

constexpr std::size_t kMaxWriteQueue = 64u << 20;  // a peer that does not read its replies

std::string uv_text(int rc) { return uv_strerror(rc); }

struct WriteReq {
  uv_write_t req{};
  Bytes own;
  std::shared_ptr<const Bytes> shared;
};

uv_stream_t* stream(Conn& c) { return reinterpret_cast<uv_stream_t*>(&c.tcp); }
uv_handle_t* handle(Conn& c) { return reinterpret_cast<uv_handle_t*>(&c.tcp); }
void free_conn(uv_handle_t* h) { delete static_cast<Conn*>(h->data); }

// Write requests own their bytes (or share an encoded frame) until the write callback.
void write(Conn& c, Bytes own, std::shared_ptr<const Bytes> shared) {
  if (c.closing) return;
  auto* w = new WriteReq;
  w->own = std::move(own);
  w->shared = std::move(shared);
  const Bytes& b = w->shared ? *w->shared : w->own;
  uv_buf_t buf = uv_buf_init(reinterpret_cast<char*>(const_cast<std::uint8_t*>(b.data())), unsigned(b.size()));
  w->req.data = w;
  int rc = uv_write(&w->req, stream(c), &buf, 1, [](uv_write_t* req, int) { delete static_cast<WriteReq*>(req->data); });
  if (rc < 0) {
    delete w;
    drop(c, fmt::format("write failed: {}", uv_text(rc)));
    return;
  }
  if (uv_stream_get_write_queue_size(stream(c)) > kMaxWriteQueue) drop(c, "does not read its replies (over 64 MiB queued)");
}

void arm_idle(Conn& c, std::chrono::milliseconds timeout) {
  if (c.closing) return;
  c.idle_armed = true;
  uv_timer_start(c.idle.get(), [](uv_timer_t* t) noexcept {
    auto& conn = *static_cast<Conn*>(t->data);
    const auto& opts = conn.server->opts;
    if (!conn.hs.ready())
      drop(conn, fmt::format("did not finish the handshake within {} ms", opts.handshake_timeout.count()));
    else
      drop(conn, fmt::format("stalled mid-frame ({} bytes of an unfinished frame for {} ms)", conn.dec.buffered(),
                             opts.frame_timeout.count()));
  }, std::uint64_t(timeout.count()), 0);
}

// Handles the buffered whole frames until the connection parks or closes, then re-arms the idle
// timer: a frame must arrive whole within frame_timeout.
void pump(Conn& c) {
  bool completed = false;
  while (!c.closing && c.park == Park::none) {
    auto f = c.dec.next();
    if (!f) break;
    completed = true;
    handle_frame(c, *f);
  }
  if (c.closing) return;
  if (c.hs.ready()) {
    if (!c.dec.partial()) disarm_idle(c);
    else if (!c.idle_armed || completed) arm_idle(c, c.server->opts.frame_timeout);
  }
}

void on_eof(Conn& c) {
  if (c.dec.partial())
    drop(c, fmt::format("closed the connection with a truncated frame ({} bytes buffered)", c.dec.buffered()));
  else if (!c.hs.ready())
    drop(c, "closed the connection during the handshake (it may have refused our proof: token mismatch?)");
  else
    close_conn(c);
}

void on_read(Conn& c, ssize_t n, const uv_buf_t* buf) noexcept {
  if (c.closing) return;
  try {
    if (n < 0) {
      if (n == UV_EOF) on_eof(c);
      else drop(c, fmt::format("read failed: {}", uv_text(int(n))));
      return;
    }
    if (n == 0) return;
    receive(c, reinterpret_cast<const std::uint8_t*>(buf->base), std::size_t(n));
  } catch (const wire::ProtocolError& e) {
    drop(c, e.what());
  } catch (const std::exception& e) {
    drop(c, fmt::format("internal error while serving it: {}", e.what()));
  }
}

// The connection in the handshake to drop first: the oldest, other than the newcomer, that has not
// sent a whole hello yet (a client answering the challenge is one round trip from done), else the
// oldest of all. So silent connections never push out a client that is proving itself, and a
// newcomer always gets its turn.
Conn& eviction_victim(ServerState& server, const Conn& newest) {
  for (Conn* c : server.pending)
    if (c != &newest && c->hs.stage() == Handshake::Stage::hello) return *c;
  return *server.pending.front();
}

// Past the caps, a connection still in the handshake makes room (see accept_conn).
void shed_load(ServerState& server, Conn& newest) {
  while (!server.pending.empty() && (server.conns.size() > server.max_conns || server.pending.size() > server.opts.max_pending)) {
    Conn& victim = eviction_victim(server, newest);
    if (server.conns.size() > server.max_conns)
      drop(victim, &victim == &newest
                       ? fmt::format("turned away: {} connections are open, the server's limit", server.max_conns)
                       : fmt::format("evicted before finishing its handshake: {} connections are open, the server's "
                                     "limit, and a newer one needs the room",
                                     server.max_conns));
    else
      drop(victim, fmt::format("evicted before finishing its handshake: over {} connections were in the handshake "
                               "at once (the oldest without a hello goes first)",
                               server.opts.max_pending));
  }
}

void start_reading(Conn& c) {
  uv_read_start(
      stream(c),
      [](uv_handle_t*, std::size_t, uv_buf_t* buf) {
        static thread_local char space[65536];
        *buf = uv_buf_init(space, sizeof space);
      },
      [](uv_stream_t* st, ssize_t n, const uv_buf_t* buf) noexcept { on_read(*static_cast<Conn*>(st->data), n, buf); });
}



// A new connection whose socket `attach` gives it (uv_accept, uv_tcp_open): registered, its
// handshake deadline running, reading. Null when it could not be set up (then closed).
template <class Attach>
Conn* new_conn(ServerState& server, Attach&& attach) {
  auto* c = new Conn;
  c->server = &server;
  uv_tcp_init(server.loop, &c->tcp);
  c->tcp.data = c;
  server.conns.push_front(c);
  c->self = server.conns.begin();
  c->pending_self = server.pending.insert(server.pending.end(), c);
  if (attach(*c) < 0) {
    close_conn(*c);
    return nullptr;
  }
  sockaddr_storage ss{};
  int len = sizeof ss;
  if (uv_tcp_getpeername(&c->tcp, reinterpret_cast<sockaddr*>(&ss), &len) == 0) c->peer = net::endpoint_text(ss);
  if (c->idle.init([&](uv_timer_t* t) { return uv_timer_init(server.loop, t); }, c) < 0 ||
      c->wait.init([&](uv_timer_t* t) { return uv_timer_init(server.loop, t); }, c) < 0 || server.stopping) {
    close_conn(*c);
    return nullptr;
  }
  arm_idle(*c, server.opts.handshake_timeout);
  start_reading(*c);
  shed_load(server, *c);
  return c->closing ? nullptr : c;
}

}  // namespace

void accept_conn(ServerState& server, uv_stream_t* listener) {
  new_conn(server, [&](Conn& c) {
    int rc = uv_accept(listener, stream(c));
    if (rc == 0) uv_tcp_nodelay(&c.tcp, 1);
    return rc;
  });
}

Conn* open_conn(ServerState& server, int fd) {
  return new_conn(server, [&](Conn& c) { return uv_tcp_open(&c.tcp, fd); });
}

void authenticated(Conn& c) {
  disarm_idle(c);
  c.dec.set_max_frame(wire::kMaxFrame);
  if (c.pending) c.server->pending.erase(c.pending_self);
  c.pending = false;
}

void receive(Conn& c, const std::uint8_t* data, std::size_t n) {
  if (c.closing) return;
  if (c.park != Park::none && c.dec.buffered() + n > wire::kMaxFrame + wire::kHeaderBytes) {
    drop(c, "kept sending while a blocking request was pending (over the frame limit buffered)");
    return;
  }
  c.dec.feed(data, n);
  pump(c);
  drain_pumps(*c.server);
}

void send_shared(Conn& c, std::shared_ptr<const Bytes> encoded) { write(c, {}, std::move(encoded)); }

void send(Conn& c, const Frame& f) {
  Bytes out;
  try {
    wire::encode(f, out);
  } catch (const wire::ProtocolError& e) {  // a reply over the frame limit (a huge status)
    out.clear();
    wire::encode(Frame(Op::error).i64(std::int64_t(ErrorCode::limit)).str(e.what()), out);
  }
  write(c, std::move(out), {});
}

void send_error(Conn& c, ErrorCode code, std::string_view msg) {
  send(c, Frame(Op::error).i64(std::int64_t(code)).str(msg));
}

void close_conn(Conn& c, Close how) {
  if (c.closing) return;
  detach(c);
  c.closing = true;
  c.idle.close();
  c.wait.close();
  c.server->conns.erase(c.self);
  if (c.pending) c.server->pending.erase(c.pending_self);
  c.pending = false;
  if (how == Close::now) return uv_close(handle(c), free_conn);
  uv_read_stop(stream(c));
  auto* req = new uv_shutdown_t;
  req->data = &c;
  int rc = uv_shutdown(req, stream(c), [](uv_shutdown_t* r, int) {
    auto& conn = *static_cast<Conn*>(r->data);
    delete r;
    if (!uv_is_closing(handle(conn))) uv_close(handle(conn), free_conn);
  });
  if (rc < 0) {
    delete req;
    uv_close(handle(c), free_conn);
  }
}

void close_stragglers(uv_loop_t* loop) {
  uv_walk(loop, [](uv_handle_t* h, void*) {
    if (!uv_is_closing(h) && h->type == UV_TCP) uv_close(h, free_conn);
  }, nullptr);
}

void disarm_idle(Conn& c) {
  if (c.idle_armed && c.idle) uv_timer_stop(c.idle.get());
  c.idle_armed = false;
}

void drop(Conn& c, std::string_view reason) {
  if (c.closing) return;
  std::string line = fmt::format("{}{}: {}", c.peer, c.hs.name().empty() ? "" : " ('" + c.hs.name() + "')", reason);
  if (c.server->drops.admit(DropLog::Clock::now(), line)) DTRAIN_WARN(rdzv, "rendezvous: dropped {}", line);
  close_conn(c);
}

void drain_pumps(ServerState& server) {
  while (!server.pump_queue.empty()) {
    auto q = std::move(server.pump_queue);
    server.pump_queue.clear();
    for (Conn* c : q) {
      if (c->closing) continue;
      try {
        pump(*c);
      } catch (const wire::ProtocolError& e) {
        drop(*c, e.what());
      }
    }
  }
}

std::string ip_of(const std::string& peer) {
  if (!peer.empty() && peer.front() == '[') return peer.substr(1, peer.find(']') - 1);
  return peer.substr(0, peer.rfind(':'));
}

}  // namespace dtrain::rdzv::srv
