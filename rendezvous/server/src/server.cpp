// The libuv rendezvous server's lifecycle: start() binds and listens on the calling thread, then runs
// the loop on a thread of its own (with every signal blocked: they are the caller's business), so it
// never waits for that thread to be scheduled; stop() wakes the loop through a uv_async_t, which
// answers every parked request, flushes and closes every connection, and lets the loop end. What the server serves lives in server/:
// connection, listener, handshake, dispatch, wait_list, scope, and per concern the pure model
// (kv_table, store_barrier, join_barrier, event_log, liveness, exit_barrier, status) with its
// handlers (store_ops, join_ops, node_ops).
#include "dtrain/rendezvous/server/server.hpp"

#include <uv.h>


#include <algorithm>
#include <thread>

#include "dtrain/common/net.hpp"
#include "dtrain/common/system.hpp"
#include "dtrain/common/errors.hpp"
#include "dtrain/common/log.hpp"
#include "dtrain/common/uv_handle.hpp"
#include "dtrain/rendezvous/store/auth.hpp"
#include "handlers.hpp"
#include "server_state.hpp"
#include "listener.hpp"

namespace dtrain::rdzv {

using std::chrono::milliseconds;
using srv::Conn;
using srv::Scope;

namespace {

constexpr milliseconds kTick{100};
constexpr milliseconds kStopGrace{2000};

static_assert(kDefaultKeysPerRun == KvLimits{}.max_keys && kDefaultBytesPerRun == KvLimits{}.max_bytes,
              "the in-memory store's budget is the server's default");

std::string uv_text(int rc) { return uv_strerror(rc); }

}  // namespace

struct Server::Impl {
  srv::ServerState server;
  const ServerOptions& opts = server.opts;
  uv_loop_t loop{};
  bool loop_inited = false;
  UvHandle<uv_tcp_t> listener;
  UvHandle<uv_async_t> async;
  UvHandle<uv_timer_t> tick;
  UvHandle<uv_timer_t> stop_timer;
  std::thread thread;
  int bound_port = 0;
  bool started = false;

  explicit Impl(ServerOptions o) : server(std::move(o)) { server.loop = &loop; }

  void on_tick() {
    auto now = Clock::now();
    if (auto text = server.drops.summary(now)) DTRAIN_WARN(rdzv, "rendezvous: {}", *text);
    server.scopes.for_each([&](Scope& s) {
      srv::close_if_ready(s, now);
      srv::send_join_progress(s, now);
      srv::check_heartbeats(s, now);
    });
    srv::drain_pumps(server);
  }

  // Parked requests get a last word, so a waiting agent can say what it was waiting for.
  void answer_parked() {
    server.scopes.for_each([](Scope& sc) {
      std::string joining = fmt::format("the rendezvous stopped before the join barrier closed: {} of {} nodes joined; {}",
                                        sc.join.joined(), sc.join.instances(), sc.join.missing_text());
      for (Conn* w : srv::Waiters(sc.joiners)) {
        srv::unpark(*w, false);
        srv::send_error(*w, wire::ErrorCode::shutting_down, joining);
      }
    });
    for (Conn* c : server.conns)
      if (c->park != srv::Park::none) {
        srv::unpark(*c, false);
        srv::send_error(*c, wire::ErrorCode::shutting_down, "the rendezvous is shutting down");
      }
  }

  void begin_stop() {
    if (server.stopping) return;
    server.stopping = true;
    listener.close();
    tick.close();
    async.close();
    answer_parked();
    // Flush what is queued, then close; the grace timer closes whatever does not flush in time.
    auto all = server.conns;
    for (Conn* c : all) srv::close_conn(*c, srv::Close::after_flush);
    stop_timer.init([&](uv_timer_t* t) { return uv_timer_init(&loop, t); }, this);
    if (!stop_timer) return;
    uv_timer_start(stop_timer.get(), [](uv_timer_t* t) noexcept {
      auto* self = static_cast<Impl*>(t->data);
      srv::close_stragglers(&self->loop);
      self->stop_timer.close();
    }, std::uint64_t(kStopGrace.count()), 0);
    uv_unref(stop_timer.handle());
  }

  // On the caller's thread, before the loop thread exists: the loop, the listening socket, the timers.
  void open() {
    try {
      int rc = uv_loop_init(&loop);
      if (rc < 0) throw IoError(fmt::format("rendezvous: cannot create the event loop: {}", uv_text(rc)));
      loop_inited = true;
      setup();
    } catch (...) {
      teardown();
      throw;
    }
  }

  // The loop thread: serves until stopped.
  void run() {
    uv_run(&loop, UV_RUN_DEFAULT);
    teardown();
  }

  void setup() {
    // Every connection is a file descriptor: stay below the open-files limit (a quarter of it, at
    // least 64, left for everything else this process holds), so accept() never fails for want of one.
    long files = sys::raise_fd_limit();
    long room = std::max(16L, files - std::max(64L, files / 4));
    server.max_conns = std::min<std::size_t>(opts.max_connections, std::size_t(room));
    bound_port = srv::listen_on(server, listener);
    int rc = async.init([&](uv_async_t* a) {
      return uv_async_init(&loop, a, [](uv_async_t* h) noexcept { static_cast<Impl*>(h->data)->begin_stop(); });
    }, this);
    if (rc < 0) throw IoError(fmt::format("rendezvous: async init: {}", uv_text(rc)));
    rc = tick.init([&](uv_timer_t* t) { return uv_timer_init(&loop, t); }, this);
    if (rc < 0) throw IoError(fmt::format("rendezvous: timer init: {}", uv_text(rc)));
    uv_timer_start(tick.get(), [](uv_timer_t* t) noexcept {
      auto* self = static_cast<Impl*>(t->data);
      try {
        self->on_tick();
      } catch (const std::exception& e) {
        DTRAIN_WARN(rdzv, "rendezvous: tick: {}", e.what());
      }
    }, std::uint64_t(kTick.count()), std::uint64_t(kTick.count()));
    DTRAIN_INFO(rdzv, "rendezvous: listening on {}:{}{}, at most {} connections ({} in the handshake)", opts.host,
                bound_port, opts.token.empty() ? " (no token)" : " (token required)", server.max_conns,
                std::min(server.max_conns, opts.max_pending));
  }

  void teardown() {
    if (!loop_inited) return;
    listener.close();
    tick.close();
    async.close();
    stop_timer.close();
    uv_run(&loop, UV_RUN_DEFAULT);  // close callbacks
    server.scopes.clear();
    if (uv_loop_close(&loop) != 0) DTRAIN_WARN(rdzv, "rendezvous: loop closed with handles still open");
    loop_inited = false;
  }
};

Server::Server(ServerOptions opts) : impl_(std::make_unique<Impl>(std::move(opts))) {}

Server::~Server() { stop(); }

void Server::start(bool serve_now) {
  auto& o = impl_->opts;
  DTRAIN_CHECK(!impl_->started, "Server::start called twice");
  if (o.port < 0 || o.port > 65535) throw ConfigError(fmt::format("rendezvous port {} out of range 0-65535", o.port));
  if (o.token.empty() && !o.insecure && !net::is_loopback_host(o.host))
    throw ConfigError(fmt::format(
        "refusing to serve the rendezvous on {} without a token: give a token file (--token-file or "
        "rendezvous.token_file), or --insecure on a trusted network; without a token only loopback addresses are allowed",
        o.host));
  auth::check_token_strength(o.token, "rendezvous token");
  impl_->open();
  impl_->started = true;
  if (serve_now) serve();
}

void Server::serve() {
  DTRAIN_CHECK(impl_->started, "Server::serve before start");
  if (impl_->thread.joinable()) return;
  sys::AllSignalsBlocked blocked;  // the thread starts with every signal blocked
  impl_->thread = std::thread([this] { impl_->run(); });
}

int Server::listen_fd() const {
  uv_os_fd_t fd = -1;
  return impl_->listener && uv_fileno(impl_->listener.handle(), &fd) == 0 ? fd : -1;
}

int Server::port() const { return impl_->bound_port; }

std::string Server::endpoint() const {
  return net::endpoint_text(impl_->opts.host, impl_->bound_port);
}

void Server::stop() {
  if (!impl_ || !impl_->started) return;
  impl_->started = false;
  if (!impl_->thread.joinable()) return impl_->teardown();  // never served: nobody else has the loop
  if (impl_->async) uv_async_send(impl_->async.get());
  impl_->thread.join();
}

}  // namespace dtrain::rdzv
