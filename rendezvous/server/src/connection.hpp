#pragma once
// One client connection of the rendezvous server: its TCP handle and timers, the incremental frame
// decoder, the capped write queue and the one close path. Frames are handed to dispatch.hpp one at
// a time; a connection parked on a blocking request (wait_list.hpp) keeps its later frames buffered
// until it is answered. Loop thread only; every libuv callback here is noexcept and drops the peer
// on an error.
#include <uv.h>

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <string_view>

#include "dtrain/common/uv_handle.hpp"
#include "dtrain/rendezvous/store/wire.hpp"
#include "handshake.hpp"

namespace dtrain::rdzv {
struct Node;
}

namespace dtrain::rdzv::srv {

struct ServerState;
struct Scope;

// What a parked connection waits for.
enum class Park { none, get, barrier, join, watch, leave };

struct Conn {
  ServerState* server = nullptr;
  uv_tcp_t tcp{};             // owns the Conn: the close callback deletes it
  UvHandle<uv_timer_t> idle;  // handshake deadline, then "stalled mid-frame" deadline
  UvHandle<uv_timer_t> wait;  // parked request timeout
  wire::Decoder dec{wire::kMaxHandshakeFrame};  // raised to kMaxFrame once the handshake is done
  std::string peer;  // "ip:port" or "[ip6]:port"
  Handshake hs;
  Scope* scope = nullptr;  // set once the handshake finished
  Node* node = nullptr;    // set by JOIN: this connection is that node's session
  Park park = Park::none;
  std::string park_key;  // the key (GET) or barrier name (BARRIER) it waits on
  std::int64_t park_timeout_ms = 0;
  bool closing = false;
  bool idle_armed = false;
  bool pending = true;                 // still in the handshake (in ServerState::pending)
  std::list<Conn*>::iterator self;     // in ServerState::conns
  std::list<Conn*>::iterator pending_self;  // in ServerState::pending while `pending`
};

// Accepts a pending connection from the listener and starts its handshake deadline. Past the
// server's caps (ServerState::max_conns open, opts.max_pending in the handshake) a connection still in the
// handshake is dropped to make room: the oldest other than the newcomer that has not sent a whole
// hello yet, else the oldest; the newcomer itself when every other one is through.
void accept_conn(ServerState& server, uv_stream_t* listener);
// The same for a socket already connected (tests, the store fuzzer): null when it could not be set
// up. The connection owns `fd` from then on.
Conn* open_conn(ServerState& server, int fd);
// The handshake succeeded: no more handshake deadline, the full frame size, out of ServerState::pending.
void authenticated(Conn& c);
// Bytes read from the peer: decoded and handled frame by frame (the libuv read callback's body).
// Throws wire::ProtocolError for a malformed frame (the caller drops the peer).
void receive(Conn& c, const std::uint8_t* data, std::size_t n);

// Queues bytes for the peer; drops it when its unread replies pass the cap.
void send_shared(Conn& c, std::shared_ptr<const Bytes> encoded);
void send(Conn& c, const wire::Frame& f);
void send_error(Conn& c, wire::ErrorCode code, std::string_view msg);

// The one close path: detaches the connection from its scope (scope.hpp), closes its timers and
// its socket, at once or once the queued replies are flushed (after a refusal, so the peer reads
// the reason). Idempotent.
enum class Close { now, after_flush };
void close_conn(Conn& c, Close how = Close::now);
// At the end of a stop: closes, unflushed, every connection socket still open on the loop.
void close_stragglers(uv_loop_t* loop);
// Logs why, then closes at once.
void drop(Conn& c, std::string_view reason);

// Stops the handshake / mid-frame deadline.
void disarm_idle(Conn& c);

// Processes the frames of connections unparked since (queued by unpark), until none is left.
void drain_pumps(ServerState& server);

// The IP part of "ip:port" / "[ip6]:port".
std::string ip_of(const std::string& peer);

}  // namespace dtrain::rdzv::srv
