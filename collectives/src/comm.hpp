#pragma once
// The CPU communicator behind the C ABI: validates each call, numbers the calls, applies deadlines,
// remembers the first failure (later calls return DTRAIN_ERR_ABORTED) and runs the call on its
// engine (engine/engine.hpp). A communicator is the world (the constructor) or a group split
// from another (split(), comm_split.cpp: its members, their hosts and its own store keys); it also
// carries point-to-point messages (sendrecv(), comm_p2p.cpp). make_engine() picks the engine from
// where the ranks are (engine/factory.cpp). The world from the environment or dtrain_comm_init takes
// the ranks of one node as contiguous, as torchrun and `dtrain launch` number them; one made through a
// caller's store (with_hosts(), comm_hosts.cpp) learns every rank's host from the store.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dtrain/collectives.h"
#include "dtrain/rendezvous/store/store.hpp"
#include "call.hpp"
#include "engine/engine.hpp"
#include "progress.hpp"

namespace dtrain::coll {

struct CommConfig {
  int rank = 0;
  int size = 1;
  int local_rank = -1;  // -1: all ranks on one node
  int local_size = -1;
  std::string run_id = "default";
  int generation = 0;
  std::chrono::milliseconds timeout{300000};
  std::string transport = "auto";  // auto | shm | tcp: the engine (DTRAIN_TRANSPORT)
  std::string advertise;           // empty: DTRAIN_SOCKET_ADDR, DTRAIN_LOCAL_ADDR, the store connection
  std::size_t shm_slot_bytes = 2 << 20;
  std::size_t shm_p2p_bytes = 2 << 20;
  std::size_t tcp_chunk_bytes = 1 << 20;
  int spin_us = 50;
};

// One direction of a point-to-point call: the buffer (src to send, dst to receive), its count and
// dtype, the peer (a rank of the communicator, the caller's own included) and the tag. `device`: the
// data moves through NCCL; only the description travels here, for matching.
struct P2pArgs {
  const void* src = nullptr;
  void* dst = nullptr;
  std::size_t count = 0;
  dtrain_dtype_t dtype = DTRAIN_UINT8;
  int peer = 0;
  int tag = 0;
  bool device = false;
};

// This host's identity for host discovery: the host name and the kernel's boot id.
std::string default_host_identity();
// The address a rank of a communicator made through a caller's store advertises for TCP when none is
// configured: DTRAIN_SOCKET_ADDR, DTRAIN_LOCAL_ADDR, the local address of a UDP socket connect()ed to
// MASTER_ADDR (no packet is sent), 127.0.0.1 when every rank is on this host, else the address of
// this host's name.
std::string default_advertise(bool all_local);

// The tag of a collective's point-to-point messages: negative, so never a user's (tags are >= 0),
// and naming the op and root in mismatch messages (describe_p2p).
int coll_tag(OpKind kind, int root);

// Fills the tunables (timeout, transport, slot and chunk sizes, spin) from the DTRAIN_* registry.
// Throws ConfigError for malformed values.
void apply_params(CommConfig& cfg, double timeout_s_override);

class Communicator {
 public:
  // The world: bootstraps the engines through `store` (keys already scoped to run id + generation).
  // Throws CollError / dtrain::Error.
  Communicator(const CommConfig& cfg, std::shared_ptr<rdzv::Store> store);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // A communicator of cfg.size ranks bootstrapped through a caller's store (dtrain_comm_init_config,
  // comm_hosts.cpp): every rank publishes `host` (its host identity) under the communicator's keys
  // and reads the others', so ranks with equal identities share memory whatever their numbers;
  // cfg.advertise, when empty, is chosen as the man page says (default_advertise()).
  static std::unique_ptr<Communicator> with_hosts(CommConfig cfg, std::shared_ptr<rdzv::Store> store,
                                                  const std::string& host);

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(members_.size()); }
  // The world rank of a rank of this communicator.
  int world_rank(int r) const { return members_[static_cast<std::size_t>(r)]; }
  // This process's local rank among the world's ranks of its host (LOCAL_RANK).
  int local_rank() const { return cfg_.local_rank; }
  // The prefix of this communicator's store keys, e.g. "coll/1/" or "coll/1/split/2/0/".
  const std::string& key_prefix() const { return key_prefix_; }
  rdzv::Store* store() const { return store_.get(); }
  std::chrono::milliseconds timeout() const { return cfg_.timeout; }
  // The deadline of later calls; <= 0 restores the one the communicator was made with.
  void set_timeout(std::chrono::milliseconds t) { cfg_.timeout = t.count() > 0 ? t : init_timeout_; }
  // "shm", "tcp", "hierarchical" or "self".
  const char* engine_name() const { return engine_->name(); }

  void allreduce(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype, dtrain_op_t op);
  void broadcast(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype, int root);
  void allgather(const void* send, void* recv, std::size_t sendcount, dtrain_dtype_t dtype);
  void reduce_scatter(const void* send, void* recv, std::size_t recvcount, dtrain_dtype_t dtype, dtrain_op_t op);
  void barrier();
  // Since 0.3 (comm_exchange.cpp): over the engine's barrier and sendrecv. recv (reduce, gather)
  // and send (scatter) are used on the root only. alltoallv's arrays have size() entries.
  void reduce(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype, dtrain_op_t op, int root);
  void gather(const void* send, void* recv, std::size_t sendcount, dtrain_dtype_t dtype, int root);
  void scatter(const void* send, void* recv, std::size_t recvcount, dtrain_dtype_t dtype, int root);
  void alltoall(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype);
  void alltoallv(const void* send, const std::size_t* sendcounts, const std::size_t* sdispls, void* recv,
                 const std::size_t* recvcounts, const std::size_t* rdispls, dtrain_dtype_t dtype);

  // MPI_Comm_split over this communicator (collective; comm_split.cpp): the ranks that pass the same
  // color >= 0 form a new communicator, ordered by key, then by rank here; a negative color joins
  // none (comm is null). `flag` is ANDed over every rank of this communicator into all_flag (the C
  // ABI asks whether every rank has an NCCL communicator to split too).
  struct Split {
    std::unique_ptr<Communicator> comm;
    bool all_flag = false;
  };
  Split split(int color, int key, bool flag);

  // Point-to-point (comm_p2p.cpp): sends `send` and receives `recv` at the same time (either may be
  // null), each the next message of its ordered pair, checked against the sender's description.
  // Messages to this rank itself are copied into a queue that its receives take from.
  void sendrecv(const P2pArgs* send, const P2pArgs* recv);
  // A receive from whichever rank's next message carries `tag` first (comm_recv_any.cpp): polls the
  // peers' next message headers (Engine::peek) round robin, spinning briefly and then sleeping,
  // until the deadline; returns that rank. A message to itself waiting in the queue counts too.
  int recv_any(void* buf, std::size_t count, dtrain_dtype_t dtype, int tag);
  // sendrecv's argument checks alone (DTRAIN_ERR_INVALID_ARGUMENT; nothing is sent).
  void check_p2p(const P2pArgs& a, const char* what) const;

  // Premultiplied sums (dtrain_redop_create_premul_sum): op handles of this communicator, from
  // kFirstPremul up, each with its scale. destroy_premul refuses a handle that is not one.
  static constexpr int kFirstPremul = 256;
  dtrain_op_t create_premul(double scale);
  void destroy_premul(dtrain_op_t op);
  // The scale of a live premultiplied-sum handle; null for any other op.
  const double* premul_scale(dtrain_op_t op) const {
    auto it = premul_.find(static_cast<int>(op));
    return it == premul_.end() ? nullptr : &it->second;
  }

  // Marks the communicator failed (used by the C ABI for errors raised outside the CPU engines).
  void mark_failed(dtrain_status_t status, const std::string& msg) noexcept;
  // dtrain_comm_abort: the one call another thread may make while a call runs here. The call in
  // progress fails through the engine's abort (DTRAIN_ERR_ABORTED with `reason`), as do later calls.
  void abort(const std::string& reason) noexcept;
  bool failed() const { return failed_; }

 private:
  // Who the communicator's ranks are (world ranks, hosts), which one this process is, and where its
  // store keys live.
  struct Group {
    std::vector<int> members;
    int rank = 0;
    std::vector<std::int64_t> host_of;  // empty for the world
    std::int64_t host = 0;              // this process's host (the world rank of its first rank)
    std::string key_prefix;
  };
  // A group split from a parent with `cfg`.
  Communicator(const CommConfig& cfg, std::shared_ptr<rdzv::Store> store, Group group);
  void start(Group group);
  OpDesc next(OpKind kind, std::size_t count, dtrain_dtype_t dtype, dtrain_op_t op, int root);
  // Refuses a reduction op the dtype does not take (DTRAIN_ERR_INVALID_ARGUMENT naming both).
  void check_reduction(OpKind kind, dtrain_dtype_t dtype, dtrain_op_t op) const;
  // For a premultiplied sum: `count` elements of src scaled into dst (src itself when dst is null).
  void premultiply(const OpDesc& d, const void* src, void* dst, std::size_t count, dtrain_op_t op);
  void check_usable() const;
  // Runs call `d` (null for point-to-point) on the engine (see below).
  template <class F>
  void run(const OpDesc* d, F&& body);
  // The next message of a collective to or from `peer` (comm_exchange.cpp): tagged coll_tag(), by
  // the call's deadline.
  P2pMsg coll_msg(const OpDesc& d, int peer, bool sending, const void* buf, std::size_t count);
  // Before a collective receives from `peer`: takes the user's messages that come first in that
  // pair's stream into parked_ (comm_exchange.cpp), so messages and collectives stay separate
  // streams as for the other collectives; the user's receives take parked messages first.
  void park_user_messages(const OpDesc& d, int peer);
  // A receive from a parked message (comm_p2p.cpp): the same checks as any receive.
  void from_parked(const P2pMsg& m);
  void pairwise(const OpDesc& d, const void* send, const std::size_t* scounts, const std::size_t* sdispls, void* recv,
                const std::size_t* rcounts, const std::size_t* rdispls, std::size_t esz);
  // point-to-point (comm_p2p.cpp)
  P2pMsg message(const P2pArgs& a, bool sending);
  void to_self(const P2pMsg& m);
  void from_self(const P2pMsg& m);

  // A message this rank sent to itself, waiting for its receive.
  struct Queued {
    P2pDesc d;
    std::vector<std::uint8_t> bytes;
  };

  CommConfig cfg_;
  std::chrono::milliseconds init_timeout_{0};
  std::shared_ptr<rdzv::Store> store_;
  std::vector<int> members_;
  int rank_ = 0;
  std::int64_t host_ = 0;
  std::string key_prefix_;
  std::unique_ptr<Engine> engine_;  // after store_: destroyed before it
  std::uint64_t seq_ = 0;
  std::uint64_t splits_ = 0;
  std::vector<std::uint64_t> sent_, received_;  // point-to-point messages per peer
  std::deque<Queued> self_;
  std::vector<std::deque<Queued>> parked_;  // per peer: user messages a collective met first
  int any_next_ = 0;  // the peer recv_any looks at first (round robin)
  std::map<int, double> premul_;  // premultiplied-sum handle -> scale
  int next_premul_ = kFirstPremul;
  std::vector<std::uint8_t> scratch_;  // scaled inputs of premultiplied sums
  bool failed_ = false;
  std::string failure_;
  std::atomic<bool> abort_claimed_{false};  // abort(): the first caller writes abort_reason_
  std::atomic<bool> aborted_{false};        // then publishes it here
  std::string abort_reason_;
};

// Runs an engine call: a failure marks the communicator failed (and aborts the engine, so waiting
// peers stop) before it propagates.
template <class F>
void Communicator::run(const OpDesc* d, F&& body) {
  progress::Scope published(d);  // the agent sees the call begin and end (progress.hpp)
  try {
    body();
  } catch (const CollError& e) {
    mark_failed(e.status(), e.what());
    throw;
  } catch (const TimeoutError& e) {
    mark_failed(DTRAIN_ERR_TIMEOUT, e.what());
    throw CollError(DTRAIN_ERR_TIMEOUT, e.what());
  } catch (const std::exception& e) {
    mark_failed(DTRAIN_ERR_INTERNAL, e.what());
    throw;
  }
}

}  // namespace dtrain::coll
