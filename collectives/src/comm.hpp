#pragma once
// The CPU communicator behind the C ABI: validates each call, numbers the calls, applies deadlines,
// remembers the first failure (later calls return DTRAIN_ERR_ABORTED) and runs the call on its
// engine (engine/engine.hpp), directly or through an algorithm written over the engine's interface:
// exchange.hpp (gather, scatter, alltoall(v)), split.hpp (split), recv_any.hpp (a receive from any
// rank). Its point-to-point streams are a Mailbox (mailbox.hpp), its premultiplied-sum ops
// PremulOps (premul.hpp). A communicator is the world (the constructor), a group split from another
// (split()), or one made through a caller's store (with_hosts(), hosts.hpp: every rank's host
// learned from the store). make_engine() picks the engine from where the ranks are
// (engine/factory.cpp); the world from the environment or dtrain_comm_init takes the ranks of one
// node as contiguous, as torchrun and `dtrain launch` number them.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "call.hpp"
#include "dtrain/collectives.h"
#include "dtrain/rendezvous/store/store.hpp"
#include "engine/engine.hpp"
#include "exchange.hpp"
#include "mailbox.hpp"
#include "members.hpp"
#include "premul.hpp"
#include "progress.hpp"
#include "recv_any.hpp"

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

// Fills the tunables (timeout, transport, slot and chunk sizes, spin) from the DTRAIN_* registry;
// timeout_s_override > 0 wins over DTRAIN_COLL_TIMEOUT_S. Throws ConfigError for malformed values.
void apply_params(CommConfig& cfg, double timeout_s_override);

// The longest deadline: 1e9 s, about 31.7 years, "no practical deadline": 1e18 ns, so a steady_clock
// time point (int64 nanoseconds, at most 9.2e18) plus it cannot overflow.
inline constexpr std::chrono::milliseconds kLongestDeadline{1'000'000'000'000LL};

// A deadline of `seconds` (> 0, +inf allowed): at least 1 ms, at most kLongestDeadline.
std::chrono::milliseconds deadline_of(double seconds);

class Communicator {
 public:
  // The world: bootstraps the engines through `store` (keys already scoped to run id + generation).
  // Throws CollError / dtrain::Error.
  Communicator(const CommConfig& cfg, std::shared_ptr<rdzv::Store> store);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // A communicator of cfg.size ranks bootstrapped through a caller's store (dtrain_comm_init_config):
  // ranks with equal `host` identities share memory whatever their numbers (hosts.hpp);
  // cfg.advertise, when empty, is chosen as the man page says (default_advertise()).
  static std::unique_ptr<Communicator> with_hosts(CommConfig cfg, std::shared_ptr<rdzv::Store> store,
                                                  const std::string& host);

  int rank() const { return members_.rank; }
  int size() const { return members_.size(); }
  // The world rank of a rank of this communicator.
  int world_rank(int r) const { return members_.world[static_cast<std::size_t>(r)]; }
  // This process's local rank among the world's ranks of its host (LOCAL_RANK).
  int local_rank() const { return cfg_.local_rank; }
  // The prefix of this communicator's store keys, e.g. "coll/1/" or "coll/1/split/2/0/".
  const std::string& key_prefix() const { return members_.key_prefix; }
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
  // Since 0.3: recv (reduce, gather) and send (scatter) are used on the root only. alltoallv's
  // arrays have size() entries.
  void reduce(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype, dtrain_op_t op, int root);
  void gather(const void* send, void* recv, std::size_t sendcount, dtrain_dtype_t dtype, int root);
  void scatter(const void* send, void* recv, std::size_t recvcount, dtrain_dtype_t dtype, int root);
  void alltoall(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype);
  void alltoallv(const void* send, const std::size_t* sendcounts, const std::size_t* sdispls, void* recv,
                 const std::size_t* recvcounts, const std::size_t* rdispls, dtrain_dtype_t dtype);

  // MPI_Comm_split over this communicator (collective; split.hpp): the ranks that pass the same
  // color >= 0 form a new communicator, ordered by key, then by rank here; a negative color joins
  // none (comm is null). `flag` is ANDed over every rank of this communicator into all_flag (the C
  // ABI asks whether every rank has an NCCL communicator to split too).
  struct Split {
    std::unique_ptr<Communicator> comm;
    bool all_flag = false;
  };
  Split split(int color, int key, bool flag);

  // Point-to-point (mailbox.hpp): sends `send` and receives `recv` at the same time (either may be
  // null), each the next message of its ordered pair, checked against the sender's description.
  void sendrecv(const P2pArgs* send, const P2pArgs* recv);
  // A receive from whichever rank's next message carries `tag` first (recv_any.hpp); returns that rank.
  int recv_any(void* buf, std::size_t count, dtrain_dtype_t dtype, int tag);
  // sendrecv's argument checks alone (DTRAIN_ERR_INVALID_ARGUMENT; nothing is sent).
  void check_p2p(const P2pArgs& a, const char* what) const;

  // Premultiplied sums (dtrain_redop_create_premul_sum): op handles of this communicator.
  dtrain_op_t create_premul(double scale);
  void destroy_premul(dtrain_op_t op) { premul_.destroy(op); }
  // The scale of a live premultiplied-sum handle; null for any other op.
  const double* premul_scale(dtrain_op_t op) const { return premul_.scale(op); }

  // Marks the communicator failed (used by the C ABI for errors raised outside the CPU engines).
  void mark_failed(dtrain_status_t status, const std::string& msg) noexcept;
  // dtrain_comm_abort: the one call another thread may make while a call runs here. The call in
  // progress fails through the engine's abort (DTRAIN_ERR_ABORTED with `reason`), as do later calls.
  void abort(const std::string& reason) noexcept;
  bool failed() const { return failed_; }

 private:
  // A group split from a parent with `cfg`, or one whose hosts were discovered.
  Communicator(const CommConfig& cfg, std::shared_ptr<rdzv::Store> store, Members members);
  void start();
  OpDesc next(OpKind kind, std::size_t count, dtrain_dtype_t dtype, dtrain_op_t op, int root);
  // Refuses a reduction op the dtype does not take (DTRAIN_ERR_INVALID_ARGUMENT naming both).
  void check_reduction(OpKind kind, dtrain_dtype_t dtype, dtrain_op_t op) const;
  void check_usable() const;
  exchange::Context context() { return {*engine_, mailbox_, rank(), size(), world_rank(rank())}; }
  // Runs call `d` (null for point-to-point) on the engine (see below).
  template <class F>
  void run(const OpDesc* d, F&& body);

  CommConfig cfg_;
  std::chrono::milliseconds init_timeout_{0};
  std::shared_ptr<rdzv::Store> store_;
  Members members_;
  std::unique_ptr<Engine> engine_;  // after store_: destroyed before it
  Mailbox mailbox_;
  AnySource any_;
  PremulOps premul_;
  std::uint64_t seq_ = 0;
  std::uint64_t splits_ = 0;
  std::vector<std::uint8_t> scratch_;  // scaled inputs of premultiplied sums, a reduce's result off the root
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
