// The libuv rendezvous server: store operations, node join barrier, heartbeats, job events.
// Everything below runs on the server's loop thread; the only cross-thread entry is stop() through
// a uv_async_t. Every libuv callback is noexcept: it catches, logs and drops the offending peer.
#include "dtrain/rendezvous/server.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <uv.h>

#include <algorithm>
#include <charconv>
#include <future>
#include <list>
#include <map>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "dtrain/common/errors.hpp"
#include "dtrain/common/log.hpp"
#include "dtrain/rendezvous/auth.hpp"
#include "dtrain/rendezvous/records.hpp"
#include "dtrain/rendezvous/wire.hpp"
#include "dtrain/common/uv_handle.hpp"

namespace dtrain::rdzv {

using wire::ErrorCode;
using wire::Frame;
using wire::Op;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

constexpr std::size_t kMaxWriteQueue = 64u << 20;  // a peer that does not read its replies
constexpr milliseconds kTick{100};
constexpr milliseconds kProgressEvery{1000};
constexpr milliseconds kStopGrace{2000};

std::string uv_text(int rc) { return uv_strerror(rc); }

std::string peer_text(const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = {};
  int port = 0;
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf);
    port = ntohs(a->sin_port);
    return fmt::format("{}:{}", buf, port);
  }
  if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf);
    port = ntohs(a->sin6_port);
    return fmt::format("[{}]:{}", buf, port);
  }
  return "?";
}

std::string ip_of(const std::string& peer) {
  if (!peer.empty() && peer.front() == '[') return peer.substr(1, peer.find(']') - 1);
  return peer.substr(0, peer.rfind(':'));
}

std::string list_text(const std::vector<std::string>& items, std::size_t cap = 16) {
  std::string out;
  for (std::size_t i = 0; i < items.size() && i < cap; ++i) out += (i ? ", " : "") + items[i];
  if (items.size() > cap) out += fmt::format(", ... ({} more)", items.size() - cap);
  return out;
}

struct Conn;

struct Node {
  int requested = -1;  // node rank asked for, -1: any
  int rank = -1;       // assigned when the join barrier closes
  std::string host, addr, spec_hash, state = "joining";
  int slots = 0, master_port = 0, offset = 0;
  std::int64_t running = 0, exited = 0, restarts = 0;
  Clock::time_point last_seen = Clock::now();
  Conn* conn = nullptr;  // its session connection, null once closed
  bool lost = false, left = false;
};

struct Scope {
  std::string run_id;
  std::int64_t generation = 0;
  std::unordered_map<std::string, Bytes> kv;
  std::size_t bytes = 0;
  std::unordered_map<std::string, std::vector<Conn*>> getters;
  struct Barrier {
    int count = 0;
    std::vector<Conn*> waiting;
  };
  std::unordered_map<std::string, Barrier> barriers;
  // join
  int instances = 0;
  std::string spec_hash;
  milliseconds hb_timeout{0};
  std::vector<std::unique_ptr<Node>> nodes;  // join order
  std::vector<Node*> by_rank;                // size instances once the first node joined
  std::vector<Conn*> joiners;                // parked in join
  bool closed = false;
  std::shared_ptr<const Bytes> table_frame;  // encoded table reply, built once
  Clock::time_point last_progress = Clock::now();
  int world_size = 0;
  std::string master_addr;
  int master_port = 0;
  // events
  std::vector<Event> events;
  std::vector<Conn*> watchers;
  bool fatal = false;
  // exit barrier
  std::vector<Conn*> leavers;
  int left = 0;
  bool finished = false;
  int conns = 0;
};

enum class Park { none, get, barrier, join, watch, leave };

struct Conn {
  Server::Impl* srv = nullptr;
  uv_tcp_t tcp{};
  UvHandle<uv_timer_t> idle;  // handshake deadline, then "stalled mid-frame" deadline
  UvHandle<uv_timer_t> wait;  // parked request timeout
  wire::Decoder dec;
  std::string peer, name, run_id;
  std::int64_t generation = 0;
  enum class St { hello, auth, ready } st = St::hello;
  Bytes cnonce, snonce;
  Scope* scope = nullptr;
  bool closing = false;
  bool idle_armed = false;
  Park park = Park::none;
  std::string park_key;
  std::int64_t watch_after = 0;
  Clock::time_point park_start;
  std::int64_t park_timeout_ms = 0;
  Node* node = nullptr;
  std::list<Conn*>::iterator self;
};

struct WriteReq {
  uv_write_t req{};
  Bytes own;
  std::shared_ptr<const Bytes> shared;
};

}  // namespace

struct Server::Impl {
  ServerOptions opts;
  uv_loop_t loop{};
  bool loop_inited = false;
  UvHandle<uv_tcp_t> listener;
  UvHandle<uv_async_t> async;
  UvHandle<uv_timer_t> tick;
  UvHandle<uv_timer_t> stop_timer;
  std::thread thread;
  std::list<Conn*> conns;
  std::map<std::pair<std::string, std::int64_t>, std::unique_ptr<Scope>> scopes;
  std::vector<Conn*> pump_queue;
  int bound_port = 0;
  bool stopping = false;
  bool started = false;

  explicit Impl(ServerOptions o) : opts(std::move(o)) {}

  // ---------- connection plumbing ----------

  void send_bytes(Conn* c, Bytes data, std::shared_ptr<const Bytes> shared = {}) {
    if (c->closing) return;
    auto* w = new WriteReq;
    w->own = std::move(data);
    w->shared = std::move(shared);
    const Bytes& b = w->shared ? *w->shared : w->own;
    uv_buf_t buf = uv_buf_init(reinterpret_cast<char*>(const_cast<std::uint8_t*>(b.data())), unsigned(b.size()));
    w->req.data = w;
    int rc = uv_write(&w->req, reinterpret_cast<uv_stream_t*>(&c->tcp), &buf, 1,
                      [](uv_write_t* req, int) { delete static_cast<WriteReq*>(req->data); });
    if (rc < 0) {
      delete w;
      drop(c, fmt::format("write failed: {}", uv_text(rc)));
      return;
    }
    if (uv_stream_get_write_queue_size(reinterpret_cast<uv_stream_t*>(&c->tcp)) > kMaxWriteQueue)
      drop(c, "does not read its replies (over 64 MiB queued)");
  }

  void send(Conn* c, const Frame& f) {
    Bytes out;
    try {
      wire::encode(f, out);
    } catch (const wire::ProtocolError& e) {  // a reply over the frame limit (a huge status)
      out.clear();
      wire::encode(Frame(Op::error).i64(std::int64_t(ErrorCode::limit)).str(e.what()), out);
    }
    send_bytes(c, std::move(out));
  }

  void send_error(Conn* c, ErrorCode code, std::string_view msg) {
    send(c, Frame(Op::error).i64(std::int64_t(code)).str(msg));
  }

  void detach(Conn* c) {
    // Remove every reference the scope holds to c.
    unpark(c, false);
    Scope* s = c->scope;
    if (s == nullptr) return;
    if (Node* n = c->node) {
      n->conn = nullptr;
      c->node = nullptr;
      if (!s->closed) {
        remove_joiner(s, n);
      } else if (!stopping && !n->left && !n->lost && !s->finished && !s->fatal) {
        declare_lost(s, n, "its connection closed without leaving (agent killed or host down)");
      }
    }
    c->scope = nullptr;
    if (--s->conns == 0) collect_scopes(s->run_id);
  }

  void drop(Conn* c, std::string_view reason) {
    if (c->closing) return;
    DTRAIN_WARN(rdzv, "rendezvous: dropped {}{}: {}", c->peer, c->name.empty() ? "" : " ('" + c->name + "')", reason);
    close_conn(c);
  }

  void close_conn(Conn* c) {
    if (c->closing) return;
    detach(c);
    c->closing = true;
    c->idle.close();
    c->wait.close();
    conns.erase(c->self);
    uv_close(reinterpret_cast<uv_handle_t*>(&c->tcp), [](uv_handle_t* h) { delete static_cast<Conn*>(h->data); });
  }

  // Sends what is queued, then closes (used after a refusal so the peer reads the reason).
  void close_after_flush(Conn* c) {
    if (c->closing) return;
    detach(c);
    c->closing = true;
    c->idle.close();
    c->wait.close();
    conns.erase(c->self);
    uv_read_stop(reinterpret_cast<uv_stream_t*>(&c->tcp));
    auto* req = new uv_shutdown_t;
    req->data = c;
    int rc = uv_shutdown(req, reinterpret_cast<uv_stream_t*>(&c->tcp), [](uv_shutdown_t* r, int) {
      auto* conn = static_cast<Conn*>(r->data);
      delete r;
      if (!uv_is_closing(reinterpret_cast<uv_handle_t*>(&conn->tcp)))
        uv_close(reinterpret_cast<uv_handle_t*>(&conn->tcp), [](uv_handle_t* h) { delete static_cast<Conn*>(h->data); });
    });
    if (rc < 0) {
      delete req;
      uv_close(reinterpret_cast<uv_handle_t*>(&c->tcp), [](uv_handle_t* h) { delete static_cast<Conn*>(h->data); });
    }
  }

  void arm_idle(Conn* c, milliseconds timeout) {
    if (c->closing) return;
    c->idle_armed = true;
    uv_timer_start(c->idle.get(), [](uv_timer_t* t) noexcept {
      auto* conn = static_cast<Conn*>(t->data);
      auto* self = conn->srv;
      if (conn->st != Conn::St::ready)
        self->drop(conn, fmt::format("did not finish the handshake within {} ms", self->opts.handshake_timeout.count()));
      else
        self->drop(conn, fmt::format("stalled mid-frame ({} bytes of an unfinished frame for {} ms)",
                                     conn->dec.buffered(), self->opts.frame_timeout.count()));
    }, std::uint64_t(timeout.count()), 0);
  }

  void disarm_idle(Conn* c) {
    if (c->idle_armed && c->idle) uv_timer_stop(c->idle.get());
    c->idle_armed = false;
  }

  void on_connection(int status) {
    if (status < 0) {
      DTRAIN_WARN(rdzv, "rendezvous: accept failed: {}", uv_text(status));
      return;
    }
    auto* c = new Conn;
    c->srv = this;
    uv_tcp_init(&loop, &c->tcp);
    c->tcp.data = c;
    conns.push_front(c);
    c->self = conns.begin();
    if (uv_accept(reinterpret_cast<uv_stream_t*>(listener.get()), reinterpret_cast<uv_stream_t*>(&c->tcp)) < 0) {
      close_conn(c);
      return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    sockaddr_storage ss{};
    int len = sizeof ss;
    if (uv_tcp_getpeername(&c->tcp, reinterpret_cast<sockaddr*>(&ss), &len) == 0) c->peer = peer_text(ss);
    if (c->idle.init([&](uv_timer_t* t) { return uv_timer_init(&loop, t); }, c) < 0 ||
        c->wait.init([&](uv_timer_t* t) { return uv_timer_init(&loop, t); }, c) < 0) {
      close_conn(c);
      return;
    }
    if (stopping) {
      close_conn(c);
      return;
    }
    arm_idle(c, opts.handshake_timeout);
    uv_read_start(
        reinterpret_cast<uv_stream_t*>(&c->tcp),
        [](uv_handle_t*, std::size_t, uv_buf_t* buf) {
          static thread_local char space[65536];
          *buf = uv_buf_init(space, sizeof space);
        },
        [](uv_stream_t* st, ssize_t n, const uv_buf_t* buf) noexcept {
          auto* conn = static_cast<Conn*>(st->data);
          conn->srv->on_read(conn, n, buf);
        });
  }

  void on_read(Conn* c, ssize_t n, const uv_buf_t* buf) noexcept {
    if (c->closing) return;
    try {
      if (n < 0) {
        if (n == UV_EOF) {
          if (c->dec.partial())
            drop(c, fmt::format("closed the connection with a truncated frame ({} bytes buffered)", c->dec.buffered()));
          else if (c->st != Conn::St::ready)
            drop(c, "closed the connection during the handshake (it may have refused our proof: token mismatch?)");
          else
            close_conn(c);
        } else {
          drop(c, fmt::format("read failed: {}", uv_text(int(n))));
        }
        return;
      }
      if (n == 0) return;
      if (c->park != Park::none && c->dec.buffered() + std::size_t(n) > wire::kMaxFrame + wire::kHeaderBytes) {
        drop(c, "kept sending while a blocking request was pending (over the frame limit buffered)");
        return;
      }
      c->dec.feed(reinterpret_cast<const std::uint8_t*>(buf->base), std::size_t(n));
      pump(c);
      drain_pumps();
    } catch (const wire::ProtocolError& e) {
      drop(c, e.what());
    } catch (const std::exception& e) {
      drop(c, fmt::format("internal error while serving it: {}", e.what()));
    }
  }

  void pump(Conn* c) {
    bool completed = false;
    while (!c->closing && c->park == Park::none) {
      auto f = c->dec.next();
      if (!f) break;
      completed = true;
      handle(c, *f);
    }
    if (c->closing) return;
    if (c->st == Conn::St::ready) {
      if (!c->dec.partial()) disarm_idle(c);
      else if (!c->idle_armed || completed) arm_idle(c, opts.frame_timeout);
    }
  }

  void drain_pumps() {
    while (!pump_queue.empty()) {
      auto q = std::move(pump_queue);
      pump_queue.clear();
      for (Conn* c : q) {
        if (c->closing) continue;
        try {
          pump(c);
        } catch (const wire::ProtocolError& e) {
          drop(c, e.what());
        }
      }
    }
  }

  // ---------- parking (blocking requests) ----------

  void park(Conn* c, Park p, std::string key, std::int64_t timeout_ms) {
    c->park = p;
    c->park_key = std::move(key);
    c->park_start = Clock::now();
    c->park_timeout_ms = timeout_ms;
    uv_timer_start(c->wait.get(), [](uv_timer_t* t) noexcept {
      auto* conn = static_cast<Conn*>(t->data);
      try {
        conn->srv->on_park_timeout(conn);
        conn->srv->drain_pumps();
      } catch (const std::exception& e) {
        conn->srv->drop(conn, fmt::format("internal error at timeout: {}", e.what()));
      }
    }, std::uint64_t(std::max<std::int64_t>(timeout_ms, 0)), 0);
  }

  // Removes c from whatever it waits on; `resume` queues its buffered frames for processing.
  void unpark(Conn* c, bool resume = true) {
    if (c->park == Park::none) return;
    Scope* s = c->scope;
    auto erase_from = [c](std::vector<Conn*>& v) { v.erase(std::remove(v.begin(), v.end(), c), v.end()); };
    if (s != nullptr) {
      switch (c->park) {
        case Park::get: {
          auto it = s->getters.find(c->park_key);
          if (it != s->getters.end()) {
            erase_from(it->second);
            if (it->second.empty()) s->getters.erase(it);
          }
          break;
        }
        case Park::barrier: {
          auto it = s->barriers.find(c->park_key);
          if (it != s->barriers.end()) {
            erase_from(it->second.waiting);
            if (it->second.waiting.empty()) s->barriers.erase(it);
          }
          break;
        }
        case Park::join: erase_from(s->joiners); break;
        case Park::watch: erase_from(s->watchers); break;
        case Park::leave: erase_from(s->leavers); break;
        case Park::none: break;
      }
    }
    c->park = Park::none;
    if (c->wait) uv_timer_stop(c->wait.get());
    if (resume && !c->closing && c->dec.buffered() > 0) pump_queue.push_back(c);
  }

  void on_park_timeout(Conn* c) {
    if (c->closing || c->park == Park::none) return;
    Scope* s = c->scope;
    Park p = c->park;
    std::string key = c->park_key;
    std::int64_t ms = c->park_timeout_ms;
    if (p == Park::barrier && s != nullptr) {
      auto& b = s->barriers[key];
      int arrived = int(b.waiting.size());
      int count = b.count;
      unpark(c);
      send_error(c, ErrorCode::timeout,
                 fmt::format("barrier '{}': {} of {} arrived after {} ms", key, arrived, count, ms));
      return;
    }
    if (p == Park::join && s != nullptr) {
      std::string text = join_missing_text(*s);
      int joined = int(s->nodes.size());
      int instances = s->instances;
      Node* n = c->node;
      unpark(c);
      if (n != nullptr) {
        c->node = nullptr;
        n->conn = nullptr;
        remove_joiner(s, n);
      }
      send_error(c, ErrorCode::timeout,
                 fmt::format("join timed out after {:g} s: {} of {} nodes joined; {}", double(ms) / 1000.0, joined, instances, text));
      return;
    }
    if (p == Park::leave && s != nullptr) {
      std::vector<std::string> missing;
      for (auto& n : s->nodes)
        if (!n->left) missing.push_back(fmt::format("node {} ({})", n->rank, n->host));
      unpark(c);
      send_error(c, ErrorCode::timeout,
                 fmt::format("exit barrier timed out after {:g} s: {} of {} nodes finished; missing: {}", double(ms) / 1000.0,
                             s->left, s->instances, list_text(missing)));
      return;
    }
    unpark(c);
    if (p == Park::get)
      send_error(c, ErrorCode::timeout, fmt::format("no value for key '{}' after {} ms", key, ms));
    else
      send_error(c, ErrorCode::timeout, fmt::format("no job event after {} ms", ms));
  }

  // ---------- scopes ----------

  Scope* scope_for(const std::string& run, std::int64_t gen) {
    auto& p = scopes[{run, gen}];
    if (!p) {
      p = std::make_unique<Scope>();
      p->run_id = run;
      p->generation = gen;
    }
    return p.get();
  }

  // Frees older generations of a run once nobody uses them: a restart never reads stale keys, and
  // the memory of finished generations comes back.
  void collect_scopes(std::string run) {  // by value: it may free the scope that owns the caller's string
    std::int64_t newest = -1;
    for (auto& [k, s] : scopes)
      if (k.first == run) newest = std::max(newest, k.second);
    for (auto it = scopes.begin(); it != scopes.end();) {
      if (it->first.first == run && it->first.second < newest && it->second->conns == 0)
        it = scopes.erase(it);
      else
        ++it;
    }
  }

  void wake_getters(Scope* s, const std::string& key) {
    auto it = s->getters.find(key);
    if (it == s->getters.end()) return;
    auto waiting = std::move(it->second);
    s->getters.erase(it);
    const Bytes& v = s->kv[key];
    Bytes out;
    wire::encode(Frame(Op::value).bytes(v), out);
    auto shared = std::make_shared<const Bytes>(std::move(out));
    for (Conn* w : waiting) {
      w->park = Park::get;  // still marked; unpark cleans the timer
      w->park_key.clear();  // entry already erased
      unpark(w);
      send_bytes(w, {}, shared);
    }
  }

  bool store_value(Conn* c, const std::string& key, Bytes value) {
    Scope* s = c->scope;
    auto it = s->kv.find(key);
    std::size_t old = it == s->kv.end() ? 0 : key.size() + it->second.size();
    if (it == s->kv.end() && s->kv.size() >= opts.max_keys_per_run) {
      send_error(c, ErrorCode::limit, fmt::format("run '{}' generation {} holds {} keys, the limit", s->run_id,
                                                  s->generation, opts.max_keys_per_run));
      return false;
    }
    std::size_t after = s->bytes - old + key.size() + value.size();
    if (after > opts.max_bytes_per_run) {
      send_error(c, ErrorCode::limit, fmt::format("run '{}' generation {} would hold {} bytes, over the {}-byte limit",
                                                  s->run_id, s->generation, after, opts.max_bytes_per_run));
      return false;
    }
    s->bytes = after;
    s->kv[key] = std::move(value);
    return true;
  }

  // ---------- requests ----------

  static std::string key_arg(const Frame& f, std::size_t i) {
    auto k = f.str_at(i);
    if (k.empty()) throw ProtocolErrorReply(ErrorCode::bad_request, "empty key");
    if (k.size() > wire::kMaxKey)
      throw ProtocolErrorReply(ErrorCode::limit,
                               fmt::format("key of {} bytes exceeds the {}-byte limit", k.size(), wire::kMaxKey));
    return std::string(k);
  }

  static void check_value(const std::string& key, std::size_t n) {
    if (n > wire::kMaxValue)
      throw ProtocolErrorReply(ErrorCode::limit, fmt::format("value for '{}' of {} bytes exceeds the {}-byte limit",
                                                             key, n, wire::kMaxValue));
  }

  // A request that is well framed but refused: replied with an error, the connection stays.
  struct ProtocolErrorReply : std::runtime_error {
    ProtocolErrorReply(ErrorCode c, const std::string& m) : std::runtime_error(m), code(c) {}
    ErrorCode code;
  };

  void refuse(Conn* c, std::string_view reason) {
    DTRAIN_WARN(rdzv, "rendezvous: refused {}{} (run '{}'): {}", c->peer, c->name.empty() ? "" : " ('" + c->name + "')",
                c->run_id, reason);
    send_error(c, ErrorCode::auth, reason);
    close_after_flush(c);
  }

  void handle(Conn* c, const Frame& f) {
    switch (c->st) {
      case Conn::St::hello: return on_hello(c, f);
      case Conn::St::auth: return on_auth(c, f);
      case Conn::St::ready: break;
    }
    try {
      on_request(c, f);
    } catch (const ProtocolErrorReply& e) {
      send_error(c, e.code, e.what());
    }
  }

  void on_hello(Conn* c, const Frame& f) {
    if (f.op != Op::hello) throw wire::ProtocolError(fmt::format("sent {} before hello", wire::op_name(f.op)));
    if (f.str_at(0) != "dtrain-rdzv") throw wire::ProtocolError("hello names an unknown protocol");
    c->name = std::string(f.str_at(1).substr(0, 128));
    c->run_id = std::string(f.str_at(2));
    c->generation = f.i64_at(3);
    auto cn = f.bytes_at(4);
    bool has_token = f.i64_at(5) != 0;
    if (c->run_id.size() > wire::kMaxKey) throw wire::ProtocolError("run id over the key limit");
    if (cn.size() != auth::kNonceBytes) throw wire::ProtocolError("hello nonce has the wrong size");
    if (c->generation < 0) return refuse(c, fmt::format("generation {} is negative", c->generation));
    if (!opts.run_id.empty() && !c->run_id.empty() && c->run_id != opts.run_id)
      return refuse(c, fmt::format("wrong run id '{}': this rendezvous serves run '{}'", c->run_id, opts.run_id));
    if (!opts.token.empty() && !has_token)
      return refuse(c, "this rendezvous requires the shared token and the client has none (give the same token "
                       "file: rendezvous.token_file or --token-file)");
    c->cnonce.assign(cn.begin(), cn.end());
    c->snonce = auth::random_nonce();
    Bytes proof;
    if (!opts.token.empty())
      proof = auth::proof(opts.token, "server", c->cnonce, c->snonce, c->run_id, c->generation);
    send(c, Frame(Op::challenge).bytes(c->snonce).bytes(proof).i64(opts.token.empty() ? 0 : 1));
    c->st = Conn::St::auth;
  }

  void on_auth(Conn* c, const Frame& f) {
    if (f.op != Op::auth) throw wire::ProtocolError(fmt::format("sent {} instead of auth", wire::op_name(f.op)));
    if (!opts.token.empty()) {
      Bytes expect = auth::proof(opts.token, "client", c->snonce, c->cnonce, c->run_id, c->generation);
      if (!auth::constant_time_equal(expect, f.bytes_at(0)))
        return refuse(c, "token mismatch: the client's proof does not match this rendezvous's token (use the same "
                         "token file on every node)");
    }
    c->st = Conn::St::ready;
    disarm_idle(c);
    c->scope = scope_for(c->run_id, c->generation);
    ++c->scope->conns;
    collect_scopes(c->run_id);  // a new generation frees the unused older ones
    send(c, Frame(Op::welcome).str(ip_of(c->peer)));
    DTRAIN_DEBUG(rdzv, "rendezvous: {} ('{}') joined run '{}' generation {}", c->peer, c->name, c->run_id, c->generation);
  }

  void on_request(Conn* c, const Frame& f) {
    Scope* s = c->scope;
    switch (f.op) {
      case Op::set: {
        auto key = key_arg(f, 0);
        auto v = f.bytes_at(1);
        check_value(key, v.size());
        if (!store_value(c, key, Bytes(v.begin(), v.end()))) return;
        send(c, Frame(Op::ok));
        wake_getters(s, key);
        return;
      }
      case Op::get: {
        auto key = key_arg(f, 0);
        std::int64_t t = f.i64_at(1);
        auto it = s->kv.find(key);
        if (it != s->kv.end()) return send(c, Frame(Op::value).bytes(it->second));
        if (t <= 0) return send_error(c, ErrorCode::timeout, fmt::format("no value for key '{}' after 0 ms", key));
        s->getters[key].push_back(c);
        park(c, Park::get, key, t);
        return;
      }
      case Op::add: {
        auto key = key_arg(f, 0);
        std::int64_t delta = f.i64_at(1);
        std::int64_t v = 0;
        if (auto it = s->kv.find(key); it != s->kv.end() && !it->second.empty()) {
          auto txt = to_string(it->second);
          auto [p, ec] = std::from_chars(txt.data(), txt.data() + txt.size(), v);
          if (ec != std::errc{} || p != txt.data() + txt.size())
            throw ProtocolErrorReply(ErrorCode::bad_request, fmt::format("add '{}': the value is not an integer", key));
        }
        v += delta;
        auto txt = std::to_string(v);
        if (!store_value(c, key, Bytes(txt.begin(), txt.end()))) return;
        send(c, Frame(Op::value).i64(v));
        wake_getters(s, key);
        return;
      }
      case Op::compare_set: {
        auto key = key_arg(f, 0);
        auto expected = f.bytes_at(1);
        auto desired = f.bytes_at(2);
        check_value(key, desired.size());
        auto it = s->kv.find(key);
        bool match = it == s->kv.end() ? expected.empty()
                                       : std::equal(it->second.begin(), it->second.end(), expected.begin(), expected.end());
        if (match) {
          if (!store_value(c, key, Bytes(desired.begin(), desired.end()))) return;
          send(c, Frame(Op::value).bytes(desired));
          wake_getters(s, key);
        } else {
          send(c, Frame(Op::value).bytes(it == s->kv.end() ? Bytes{} : it->second));
        }
        return;
      }
      case Op::check: {
        bool all = true;
        for (std::size_t i = 0; i < f.args.size(); ++i)
          if (!s->kv.count(key_arg(f, i))) all = false;
        return send(c, Frame(Op::value).i64(all ? 1 : 0));
      }
      case Op::erase: {
        auto key = key_arg(f, 0);
        auto it = s->kv.find(key);
        bool had = it != s->kv.end();
        if (had) {
          s->bytes -= key.size() + it->second.size();
          s->kv.erase(it);
        }
        return send(c, Frame(Op::value).i64(had ? 1 : 0));
      }
      case Op::barrier: {
        auto name = key_arg(f, 0);
        std::int64_t count = f.i64_at(1);
        std::int64_t t = f.i64_at(2);
        if (count < 1 || count > 1000000)
          throw ProtocolErrorReply(ErrorCode::bad_request, fmt::format("barrier '{}': count {} out of range", name, count));
        auto& b = s->barriers[name];
        if (!b.waiting.empty() && b.count != count)
          throw ProtocolErrorReply(ErrorCode::bad_request,
                                   fmt::format("barrier '{}': this caller expects {} but others expect {}", name, count, b.count));
        b.count = int(count);
        b.waiting.push_back(c);
        if (int(b.waiting.size()) == b.count) {
          auto waiting = std::move(b.waiting);
          s->barriers.erase(name);
          auto shared = std::make_shared<const Bytes>(wire::encode(Frame(Op::ok)));
          for (Conn* w : waiting) {
            if (w != c) {
              w->park_key.clear();
              unpark(w);
            }
            send_bytes(w, {}, shared);
          }
          return;
        }
        park(c, Park::barrier, name, t);
        return;
      }
      case Op::join: return on_join(c, f);
      case Op::heartbeat: return on_heartbeat(c, f);
      case Op::report: return on_report(c, f);
      case Op::watch: {
        std::int64_t after = f.i64_at(0);
        std::int64_t t = f.i64_at(1);
        for (const auto& e : s->events)
          if (e.seq > after) return send(c, Frame(Op::value).bytes(pack_event(e)));
        if (t <= 0) return send_error(c, ErrorCode::timeout, "no job event after 0 ms");
        c->watch_after = after;
        s->watchers.push_back(c);
        park(c, Park::watch, {}, t);
        return;
      }
      case Op::leave: return on_leave(c, f);
      case Op::status: return on_status(c, f);
      case Op::list_runs: {
        Frame r(Op::value);
        std::string last;
        for (auto& [k, sc] : scopes)
          if (k.first != last && !sc->nodes.empty()) {
            r.str(k.first);
            last = k.first;
          }
        return send(c, r);
      }
      case Op::table: {
        if (!s->closed) throw ProtocolErrorReply(ErrorCode::not_joined, "the join barrier has not closed yet");
        return send_bytes(c, {}, s->table_frame);
      }
      default:
        throw wire::ProtocolError(fmt::format("sent a {} frame, which is not a request", wire::op_name(f.op)));
    }
  }

  // ---------- node coordination ----------

  // "node 2, node 3" or, when some nodes joined without a fixed rank, "1 more node(s) (ranks not taken: 2)".
  static std::string missing_short(const Scope& s, std::size_t cap = 8) {
    std::vector<std::string> missing;
    int autos = 0;
    for (const auto& n : s.nodes)
      if (n->requested < 0) ++autos;
    for (int r = 0; r < int(s.by_rank.size()); ++r)
      if (s.by_rank[std::size_t(r)] == nullptr) missing.push_back(fmt::format("node {}", r));
    if (autos == 0) return list_text(missing, cap);
    return fmt::format("{} more node(s) (ranks not taken: {})", s.instances - int(s.nodes.size()), list_text(missing, cap));
  }

  static std::string join_missing_text(const Scope& s) {
    std::vector<std::string> joined;
    for (const auto& n : s.nodes)
      joined.push_back(n->requested >= 0 ? fmt::format("node {} on {}", n->requested, n->host) : n->host);
    return fmt::format("missing: {} (joined: {})", missing_short(s, 32),
                       joined.empty() ? std::string("none") : list_text(joined, 32));
  }

  void remove_joiner(Scope* s, Node* n) {
    if (n->requested >= 0 && n->requested < int(s->by_rank.size()) && s->by_rank[std::size_t(n->requested)] == n)
      s->by_rank[std::size_t(n->requested)] = nullptr;
    s->nodes.erase(std::remove_if(s->nodes.begin(), s->nodes.end(), [n](auto& p) { return p.get() == n; }), s->nodes.end());
    if (s->nodes.empty() && !s->closed) {
      s->instances = 0;
      s->spec_hash.clear();
      s->by_rank.clear();
    }
  }

  void on_join(Conn* c, const Frame& f) {
    Scope* s = c->scope;
    std::string host(f.str_at(0).substr(0, 256));
    auto requested = f.i64_at(1);
    auto slots = f.i64_at(2);
    auto instances = f.i64_at(3);
    std::string hash(f.str_at(4).substr(0, 256));
    auto master_port = f.i64_at(5);
    std::string addr(f.str_at(6).substr(0, 256));
    auto hb_timeout = f.i64_at(7);
    auto timeout = f.i64_at(8);
    if (c->node != nullptr) throw ProtocolErrorReply(ErrorCode::bad_request, "this connection already joined");
    if (instances < 1 || instances > 65536)
      throw ProtocolErrorReply(ErrorCode::bad_request, fmt::format("instances {} out of range 1-65536", instances));
    if (slots < 0 || slots > 100000)
      throw ProtocolErrorReply(ErrorCode::bad_request, fmt::format("slot count {} out of range", slots));
    if (requested >= instances)
      throw ProtocolErrorReply(ErrorCode::too_many_nodes,
                               fmt::format("host {} asks for node rank {} but the job has {} nodes (ranks 0-{})", host,
                                           requested, instances, instances - 1));
    if (s->closed) {
      std::vector<std::string> hosts;
      for (auto& n : s->nodes) hosts.push_back(n->host);
      throw ProtocolErrorReply(ErrorCode::too_many_nodes,
                               fmt::format("too many nodes: the job expects {} nodes and all have joined ({}); host {} "
                                           "is one too many",
                                           s->instances, list_text(hosts), host));
    }
    if (s->nodes.empty()) {
      s->instances = int(instances);
      s->spec_hash = hash;
      s->hb_timeout = milliseconds(hb_timeout);
      s->by_rank.assign(std::size_t(instances), nullptr);
    } else {
      const Node& first = *s->nodes.front();
      if (instances != s->instances)
        throw ProtocolErrorReply(ErrorCode::spec_mismatch,
                                 fmt::format("spec mismatch: host {} expects {} nodes but host {} joined expecting {}; "
                                             "every node must run the same job spec",
                                             host, instances, first.host, s->instances));
      if (hash != s->spec_hash)
        throw ProtocolErrorReply(ErrorCode::spec_mismatch,
                                 fmt::format("spec mismatch: host {} has job spec hash {} but host {} joined with {}; "
                                             "every node must run the same command and cluster spec",
                                             host, hash, first.host, s->spec_hash));
    }
    if (requested >= 0 && s->by_rank[std::size_t(requested)] != nullptr)
      throw ProtocolErrorReply(ErrorCode::duplicate_rank,
                               fmt::format("duplicate node rank {}: host {} already joined as node {}, and host {} asks "
                                           "for it too; give each node its own node rank",
                                           requested, s->by_rank[std::size_t(requested)]->host, requested, host));
    if (int(s->nodes.size()) >= s->instances)
      throw ProtocolErrorReply(ErrorCode::too_many_nodes,
                               fmt::format("too many nodes: the job expects {} and {} have joined; host {} is one too many",
                                           s->instances, s->nodes.size(), host));
    auto n = std::make_unique<Node>();
    n->requested = int(requested);
    n->host = host;
    n->addr = addr.empty() ? ip_of(c->peer) : addr;
    n->slots = int(slots);
    n->master_port = int(master_port);
    n->spec_hash = hash;
    n->conn = c;
    c->node = n.get();
    if (requested >= 0) s->by_rank[std::size_t(requested)] = n.get();
    s->nodes.push_back(std::move(n));
    if (int(s->nodes.size()) == s->instances) return close_join(s, c);
    s->joiners.push_back(c);
    park(c, Park::join, {}, timeout);
  }

  void close_join(Scope* s, Conn* last) {
    // Ranks: explicit ones are in by_rank; the others fill the free ranks in join order. O(n).
    std::size_t cursor = 0;
    for (auto& n : s->nodes) {
      if (n->requested >= 0) continue;
      while (s->by_rank[cursor] != nullptr) ++cursor;
      s->by_rank[cursor] = n.get();
    }
    int offset = 0;
    std::vector<Bytes> entries;
    entries.reserve(s->by_rank.size());
    for (int r = 0; r < s->instances; ++r) {
      Node* n = s->by_rank[std::size_t(r)];
      n->rank = r;
      n->offset = offset;
      offset += n->slots;
      n->state = "joined";
      n->last_seen = Clock::now();
      entries.push_back(pack_node_entry(NodeEntry{r, n->host, n->addr, n->slots, n->offset}));
    }
    s->world_size = offset;
    Node* master = s->by_rank[0];
    s->master_addr = master->addr;
    s->master_port = master->master_port;
    s->closed = true;
    Frame tf(Op::value);
    for (auto& e : entries) tf.args.push_back(std::move(e));
    try {
      s->table_frame = std::make_shared<const Bytes>(wire::encode(tf));
    } catch (const wire::ProtocolError& e) {  // the rank table alone is over the frame limit
      s->table_frame = std::make_shared<const Bytes>(wire::encode(
          Frame(Op::error).i64(std::int64_t(ErrorCode::limit)).str(fmt::format("rank table of {} nodes: {}", s->instances, e.what()))));
    }
    auto joiners = std::move(s->joiners);
    s->joiners.clear();
    joiners.push_back(last);
    for (Conn* w : joiners) {
      if (w != last) unpark(w);
      Node* n = w->node;
      JoinReply r{n->rank, s->instances, s->world_size, n->offset, n->slots, s->master_addr, s->master_port};
      send(w, Frame(Op::value).bytes(pack_join_reply(r)));
    }
    DTRAIN_INFO(rdzv, "rendezvous: run '{}' generation {}: {} nodes joined, world size {}, master {}:{}", s->run_id,
                s->generation, s->instances, s->world_size, s->master_addr, s->master_port);
  }

  void add_event(Scope* s, Event e) {
    e.seq = std::int64_t(s->events.size()) + 1;
    e.generation = s->generation;
    if (e.kind == "lost" || e.kind == "failure") {
      if (!s->fatal) e.root_cause = true;
      s->fatal = true;
    }
    s->events.push_back(e);
    Bytes out;
    wire::encode(Frame(Op::value).bytes(pack_event(s->events.back())), out);
    auto shared = std::make_shared<const Bytes>(std::move(out));
    auto watchers = std::move(s->watchers);
    s->watchers.clear();
    for (Conn* w : watchers) {
      unpark(w);
      send_bytes(w, {}, shared);
    }
    if (e.kind == "lost") {
      auto leavers = std::move(s->leavers);
      s->leavers.clear();
      for (Conn* w : leavers) {
        unpark(w);
        send_error(w, ErrorCode::lost, fmt::format("node {} ({}) was lost before the exit barrier: {}", e.node, e.host, e.message));
      }
    }
  }

  void declare_lost(Scope* s, Node* n, const std::string& why) {
    if (n->lost || n->left) return;
    n->lost = true;
    n->state = "lost";
    DTRAIN_WARN(rdzv, "rendezvous: run '{}': node {} ({}) lost: {}", s->run_id, n->rank, n->host, why);
    Event e;
    e.kind = "lost";
    e.node = n->rank;
    e.host = n->host;
    e.message = why;
    add_event(s, e);
  }

  void on_heartbeat(Conn* c, const Frame& f) {
    Node* n = c->node;
    if (n == nullptr || !c->scope->closed)
      throw ProtocolErrorReply(ErrorCode::not_joined, "heartbeat from a connection that has not joined");
    if (n->lost)
      throw ProtocolErrorReply(ErrorCode::lost, "this node was already declared lost; stop and re-join");
    n->last_seen = Clock::now();
    n->state = std::string(f.str_at(0).substr(0, 32));
    n->running = f.i64_at(1);
    n->exited = f.i64_at(2);
    n->restarts = f.i64_at(3);
    send(c, Frame(Op::ok));
  }

  void on_report(Conn* c, const Frame& f) {
    Event e;
    e.kind = "failure";
    e.node = int(f.i64_at(0));
    e.rank = int(f.i64_at(1));
    e.exit_code = int(f.i64_at(2));
    e.signal = int(f.i64_at(3));
    e.message = std::string(f.str_at(4).substr(0, 4096));
    if (c->node != nullptr) e.host = c->node->host;
    add_event(c->scope, e);
    send(c, Frame(Op::ok));
  }

  void on_leave(Conn* c, const Frame& f) {
    Scope* s = c->scope;
    Node* n = c->node;
    std::int64_t t = f.i64_at(0);
    if (n == nullptr || !s->closed) throw ProtocolErrorReply(ErrorCode::not_joined, "leave from a connection that has not joined");
    if (!n->left) {
      n->left = true;
      n->state = "done";
      ++s->left;
    }
    for (auto& other : s->nodes)
      if (other->lost)
        throw ProtocolErrorReply(ErrorCode::lost, fmt::format("node {} ({}) was lost before the exit barrier", other->rank, other->host));
    if (s->left == s->instances) {
      s->finished = true;
      auto leavers = std::move(s->leavers);
      s->leavers.clear();
      for (Conn* w : leavers) {
        unpark(w);
        send(w, Frame(Op::ok));
      }
      send(c, Frame(Op::ok));
      return;
    }
    s->leavers.push_back(c);
    park(c, Park::leave, {}, t);
  }

  void on_status(Conn* c, const Frame& f) {
    std::string run(f.str_at(0));
    if (run.empty()) run = c->run_id;
    Scope* best = nullptr;
    for (auto& [k, sc] : scopes)
      if (k.first == run && !sc->nodes.empty()) best = sc.get();
    RunStatus st;
    st.run_id = run;
    if (best != nullptr) {
      st.generation = best->generation;
      st.instances = best->instances;
      st.joined = int(best->nodes.size());
      st.closed = best->closed;
      st.world_size = best->world_size;
      st.master_addr = best->master_addr;
      st.master_port = best->master_port;
      for (const auto& e : best->events)
        if (e.root_cause) st.root_cause = describe_event(e);
      auto now = Clock::now();
      for (const auto& n : best->nodes) {
        NodeStatus ns;
        ns.node_rank = n->rank >= 0 ? n->rank : n->requested;
        ns.host = n->host;
        ns.addr = n->addr;
        ns.state = n->state;
        ns.slots = n->slots;
        ns.running = n->running;
        ns.exited = n->exited;
        ns.restarts = n->restarts;
        ns.heartbeat_age_ms = std::chrono::duration_cast<milliseconds>(now - n->last_seen).count();
        st.nodes.push_back(ns);
      }
      std::sort(st.nodes.begin(), st.nodes.end(), [](auto& a, auto& b) { return a.node_rank < b.node_rank; });
    }
    send(c, Frame(Op::value).bytes(pack_run_status(st)));
  }

  void on_tick() {
    auto now = Clock::now();
    for (auto& [k, sp] : scopes) {
      Scope* s = sp.get();
      if (!s->closed && !s->joiners.empty() && now - s->last_progress >= kProgressEvery) {
        s->last_progress = now;
        Bytes out;
        wire::encode(Frame(Op::progress).i64(std::int64_t(s->nodes.size())).i64(s->instances).str(missing_short(*s)), out);
        auto shared = std::make_shared<const Bytes>(std::move(out));
        for (Conn* w : s->joiners) send_bytes(w, {}, shared);
      }
      if (s->closed && !s->finished && !s->fatal && s->hb_timeout.count() > 0) {
        for (auto& n : s->nodes) {
          if (n->lost || n->left) continue;
          auto age = std::chrono::duration_cast<milliseconds>(now - n->last_seen);
          if (age > s->hb_timeout) {
            declare_lost(s, n.get(), fmt::format("no heartbeat for {:.1f} s (timeout {:.1f} s)", double(age.count()) / 1000.0,
                                                 double(s->hb_timeout.count()) / 1000.0));
            break;  // the scope is now fatal; iterators stay valid
          }
        }
      }
    }
    drain_pumps();
  }

  // ---------- lifecycle ----------

  void begin_stop() {
    if (stopping) return;
    stopping = true;
    listener.close();
    tick.close();
    async.close();
    // Parked requests get a last word, so a waiting agent can say what it was waiting for.
    for (auto& [k, sp] : scopes) {
      Scope* sc = sp.get();
      std::string joining = fmt::format("the rendezvous stopped before the join barrier closed: {} of {} nodes joined; {}",
                                        sc->nodes.size(), sc->instances, join_missing_text(*sc));
      for (Conn* w : std::vector<Conn*>(sc->joiners)) {
        unpark(w, false);
        send_error(w, ErrorCode::shutting_down, joining);
      }
    }
    for (Conn* c : conns)
      if (c->park != Park::none) {
        unpark(c, false);
        send_error(c, ErrorCode::shutting_down, "the rendezvous is shutting down");
      }
    // Flush what is queued, then close; the grace timer closes whatever does not flush in time.
    auto all = conns;
    for (Conn* c : all) close_after_flush(c);
    stop_timer.init([&](uv_timer_t* t) { return uv_timer_init(&loop, t); }, this);
    if (stop_timer) {
      uv_timer_start(stop_timer.get(), [](uv_timer_t* t) noexcept {
        auto* self = static_cast<Impl*>(t->data);
        uv_walk(&self->loop, [](uv_handle_t* h, void*) {
          if (!uv_is_closing(h) && h->type == UV_TCP) uv_close(h, [](uv_handle_t* x) { delete static_cast<Conn*>(x->data); });
        }, nullptr);
        self->stop_timer.close();
      }, std::uint64_t(kStopGrace.count()), 0);
      uv_unref(reinterpret_cast<uv_handle_t*>(stop_timer.get()));
    }
  }

  // Runs on the loop thread: binds, reports to start(), serves until stopped.
  void run(std::promise<void>& ready) {
    try {
      int rc = uv_loop_init(&loop);
      if (rc < 0) throw IoError(fmt::format("rendezvous: cannot create the event loop: {}", uv_text(rc)));
      loop_inited = true;
      setup();
    } catch (...) {
      teardown();
      ready.set_exception(std::current_exception());
      return;
    }
    ready.set_value();
    uv_run(&loop, UV_RUN_DEFAULT);
    teardown();
  }

  void setup() {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* res = nullptr;
    std::string port = std::to_string(opts.port);
    int g = ::getaddrinfo(opts.host.c_str(), port.c_str(), &hints, &res);
    if (g != 0)
      throw IoError(fmt::format("rendezvous: cannot resolve listen address '{}': {}", opts.host, ::gai_strerror(g)));
    std::unique_ptr<addrinfo, void (*)(addrinfo*)> guard(res, ::freeaddrinfo);
    int rc = listener.init([&](uv_tcp_t* t) { return uv_tcp_init(&loop, t); }, this);
    if (rc < 0) throw IoError(fmt::format("rendezvous: tcp init: {}", uv_text(rc)));
    rc = uv_tcp_bind(listener.get(), res->ai_addr, 0);
    if (rc == 0)
      rc = uv_listen(reinterpret_cast<uv_stream_t*>(listener.get()), opts.backlog, [](uv_stream_t* s, int status) noexcept {
        auto* self = static_cast<Impl*>(s->data);
        try {
          self->on_connection(status);
        } catch (const std::exception& e) {
          DTRAIN_WARN(rdzv, "rendezvous: accept: {}", e.what());
        }
      });
    if (rc < 0)
      throw IoError(fmt::format("rendezvous: cannot listen on {}:{}: {}{}", opts.host, opts.port, uv_text(rc),
                                rc == UV_EADDRINUSE ? " (another process uses that port; pick another or 0 for a free one)"
                                : rc == UV_EADDRNOTAVAIL ? " (no local interface has that address)"
                                                         : ""));
    sockaddr_storage ss{};
    int len = sizeof ss;
    uv_tcp_getsockname(listener.get(), reinterpret_cast<sockaddr*>(&ss), &len);
    bound_port = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                          : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
    rc = async.init([&](uv_async_t* a) {
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
    DTRAIN_INFO(rdzv, "rendezvous: listening on {}:{}{}", opts.host, bound_port,
                opts.token.empty() ? " (no token)" : " (token required)");
  }

  void teardown() {
    if (!loop_inited) return;
    listener.close();
    tick.close();
    async.close();
    stop_timer.close();
    uv_run(&loop, UV_RUN_DEFAULT);  // close callbacks
    scopes.clear();
    if (uv_loop_close(&loop) != 0) DTRAIN_WARN(rdzv, "rendezvous: loop closed with handles still open");
    loop_inited = false;
  }
};

bool is_loopback_host(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0) return false;
  bool all = res != nullptr;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family == AF_INET) {
      auto a = ntohl(reinterpret_cast<sockaddr_in*>(ai->ai_addr)->sin_addr.s_addr);
      if ((a >> 24) != 127) all = false;
    } else if (ai->ai_family == AF_INET6) {
      auto* a6 = &reinterpret_cast<sockaddr_in6*>(ai->ai_addr)->sin6_addr;
      if (!IN6_IS_ADDR_LOOPBACK(a6)) all = false;
    } else {
      all = false;
    }
  }
  ::freeaddrinfo(res);
  return all;
}

Server::Server(ServerOptions opts) : impl_(std::make_unique<Impl>(std::move(opts))) {}

Server::~Server() { stop(); }

void Server::start() {
  auto& o = impl_->opts;
  DTRAIN_CHECK(!impl_->started, "Server::start called twice");
  if (o.port < 0 || o.port > 65535) throw ConfigError(fmt::format("rendezvous port {} out of range 0-65535", o.port));
  if (o.token.empty() && !o.insecure && !is_loopback_host(o.host))
    throw ConfigError(fmt::format(
        "refusing to serve the rendezvous on {} without a token: give a token file (--token-file or "
        "rendezvous.token_file), or --insecure on a trusted network; without a token only loopback addresses are allowed",
        o.host));
  std::promise<void> ready;
  auto fut = ready.get_future();
  impl_->thread = std::thread([this, &ready] { impl_->run(ready); });
  try {
    fut.get();
  } catch (...) {
    impl_->thread.join();
    throw;
  }
  impl_->started = true;
}

int Server::port() const { return impl_->bound_port; }

std::string Server::endpoint() const {
  const auto& h = impl_->opts.host;
  return h.find(':') != std::string::npos ? fmt::format("[{}]:{}", h, impl_->bound_port)
                                          : fmt::format("{}:{}", h, impl_->bound_port);
}

void Server::stop() {
  if (!impl_ || !impl_->started) return;
  impl_->started = false;
  if (impl_->async) uv_async_send(impl_->async.get());
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace dtrain::rdzv
