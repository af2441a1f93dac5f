#pragma once
// The TCP engine's "device" (Gloo's Device with its Pairs): one socket to every other rank of a
// group, set up through the store, and the one primitive the algorithms (group.hpp) are written
// against. Setup (mesh_setup.cpp): each rank listens on its advertised address and publishes
// "address port host" under <key_prefix>tcp/<rank> (rank 0 first puts 32 random bytes, the
// communicator's secret, under <key_prefix>tcp/secret); it connects to every lower rank and accepts
// every higher one, each connection proving the secret (mesh_handshake.hpp) before it is bound to a
// rank; strangers are dropped with a warning and the listener closes once every peer is in. Exchange
// (mesh_exchange.cpp): a send to one rank and a receive from another at the same time (stream():
// many such exchanges pipelined); every message is preceded by a header with the call's sequence
// number, fingerprint and length, and a difference fails the call with DTRAIN_ERR_MISMATCH.
// Point-to-point messages (mesh_p2p.cpp) travel on the same sockets as frames of their own channel;
// an exchange that meets one parks it in the peer's inbox, where the matching receive finds it. A
// failing rank records why in the store (<key_prefix>abort) and shuts its sockets, so the others
// fail at once and report the root cause. Ranks are group ranks; messages name world ranks (Options::members).
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "../../call.hpp"
#include "../engine.hpp"
#include "dtrain/rendezvous/store/store.hpp"

namespace dtrain::coll::tcp {

struct Options {
  std::vector<int> members;        // world rank of each group rank (the group's size)
  int rank = 0;                    // this process's group rank
  rdzv::Store* store = nullptr;
  std::string key_prefix;          // store keys of this communicator
  std::string advertise_host;      // address to listen on and advertise
  std::chrono::milliseconds timeout{300000};
  std::size_t chunk_bytes = 1 << 20;
  int spin_us = 0;                 // poll() without sleeping this long first (0: sleep at once)
};

// The address a rank listens on when none is configured: DTRAIN_SOCKET_ADDR, DTRAIN_LOCAL_ADDR, the
// local address of the store connection (the interface that reaches the store), else 127.0.0.1.
std::string resolve_advertise_host(const std::string& configured, rdzv::Store* store);

// Milliseconds from now to the deadline, clamped to 0..1000: a poll() timeout.
int ms_left(Clock::time_point deadline);

// The header before every message on a socket (both ends run the same build: host byte order).
struct WireHeader {
  std::uint32_t magic;
  std::uint32_t channel;  // kCollective or kP2p
  std::uint64_t seq;      // the collective call's number, or the message's number between the pair
  std::uint64_t fp0;      // fingerprint (OpDesc or P2pDesc)
  std::uint64_t fp1;
  std::uint64_t len;      // payload bytes that follow
};
static_assert(sizeof(WireHeader) == 40);
inline constexpr std::uint32_t kWireMagic = 0x3147534d;  // "MSG1"
inline constexpr std::uint32_t kCollective = 0;
inline constexpr std::uint32_t kP2p = 1;

class Mesh {
 public:
  explicit Mesh(const Options& options);  // listens, publishes, connects; throws CollError
  ~Mesh();
  Mesh(const Mesh&) = delete;
  Mesh& operator=(const Mesh&) = delete;

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(members_.size()); }
  std::size_t chunk_bytes() const { return chunk_bytes_; }
  // Sends slen bytes to rank `to` and receives rlen bytes from rank `from` concurrently (either may
  // be -1), by d.deadline.
  void exchange(const OpDesc& d, int to, const void* sbuf, std::size_t slen, int from, void* rbuf,
                std::size_t rlen);
  // A pipelined run of exchanges with one pair of peers (a ring's steps in one go): message i sends
  // segs[i].send (slen bytes) to `to` and receives segs[i].rlen bytes from `from` into
  // segs[i].recv, each direction in order. Send i starts once fewer than `lead` receives before it
  // are missing (i < receives done + lead); when receive i is complete, on_recv(i) runs before
  // receive i+1 starts (so a receive buffer may be reused by the next one). Both directions
  // progress together, by d.deadline.
  struct Segment {
    const void* send = nullptr;
    std::size_t slen = 0;
    void* recv = nullptr;
    std::size_t rlen = 0;
  };
  void stream(const OpDesc& d, int to, int from, const std::vector<Segment>& segs, std::size_t lead,
              const std::function<void(std::size_t)>& on_recv);
  // Publishes the failure to the store and shuts every socket so peers stop waiting.
  void abort(dtrain_status_t status, const std::string& msg) noexcept;

  // Point-to-point (mesh_p2p.cpp): sends `out` and receives `in` together (either may be null), by
  // their deadlines. In steps, for the hierarchical engine: p2p_begin(), p2p_step() (never blocks;
  // true when it moved bytes) until finished(), p2p_wait() when nothing moved (polls the sockets up
  // to max_ms; throws past the deadline).
  struct P2pXfer {
    const P2pMsg* out = nullptr;
    const P2pMsg* in = nullptr;
    WireHeader sh{}, rh{};
    std::size_t sent = 0, stotal = 0;  // header + payload bytes sent
    std::size_t hgot = 0, got = 0;     // header and payload bytes received
    bool send_done = true, recv_done = true;
    bool finished() const { return send_done && recv_done; }
  };
  void sendrecv(const P2pMsg* out, const P2pMsg* in);
  // Engine::peek: a frame parked in the peer's inbox, else the socket's next bytes (MSG_PEEK).
  coll::Engine::Peek peek(int peer, std::uint64_t& fp0, std::uint64_t& fp1);
  void p2p_begin(P2pXfer& x, const P2pMsg* out, const P2pMsg* in);
  bool p2p_step(P2pXfer& x);
  void p2p_wait(P2pXfer& x, int max_ms);

 private:
  struct Pair {
    int fd = -1;
    std::string host;  // advertised name or address
    std::string addr;  // numeric address
    int port = 0;
  };
  struct Xfer;
  struct Incoming;
  enum class Greet { ok, io, refused };
  // A point-to-point frame an exchange read while waiting for collective data.
  struct Parked {
    WireHeader h;
    std::vector<std::uint8_t> payload;
  };

  // setup (mesh_setup.cpp)
  void listen_on(const std::string& host);
  void read_addresses();
  void connect_lower(Clock::time_point deadline);
  Greet greet(int fd, int r, Clock::time_point deadline, std::string& why);
  void accept_higher(Clock::time_point deadline);
  void accept_new(std::vector<Incoming>& in);
  bool advance(Incoming& c);
  void drop(Incoming& c, const std::string& why);
  void close_all() noexcept;
  // exchange (mesh_exchange.cpp)
  bool send_some(const OpDesc& d, Xfer& x);
  bool recv_some(const OpDesc& d, Xfer& x);
  void check_header(const OpDesc& d, const Xfer& x) const;
  void wait_for(const OpDesc& d, const Xfer& x);
  bool spin_ready(struct pollfd* pfd, int n) const;
  [[noreturn]] void peer_failed(const std::string& call, int peer, const std::string& what);
  [[noreturn]] void fail_timeout(const OpDesc& d, int to, int from);
  // point-to-point (mesh_p2p.cpp)
  bool p2p_send_some(P2pXfer& x);
  bool p2p_recv_some(P2pXfer& x);
  void check_p2p_header(const P2pXfer& x, const WireHeader& h) const;
  std::string p2p_call(const P2pXfer& x) const;
  [[noreturn]] void p2p_timeout(const P2pXfer& x);

  int world(int r) const { return members_[static_cast<std::size_t>(r)]; }
  std::string peer_text(int r) const;

  std::vector<int> members_;
  int rank_;
  rdzv::Store* store_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
  std::size_t chunk_bytes_;
  int spin_us_;
  int listen_fd_ = -1;
  rdzv::Bytes secret_;  // the communicator's, from the store (handshake::kSecretBytes)
  std::vector<Pair> pairs_;
  std::vector<std::deque<Parked>> inbox_;  // per peer, in arrival order
  std::atomic<bool> aborted_{false};  // abort() may come from another thread (dtrain_comm_abort)
};

}  // namespace dtrain::coll::tcp
