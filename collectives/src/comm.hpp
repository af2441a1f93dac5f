#pragma once
// The CPU communicator behind the C ABI: validates each call, numbers the calls, applies deadlines,
// remembers the first failure (later calls return DTRAIN_ERR_ABORTED) and runs the call on its
// transport (transport/transport.hpp), which make_transport() picks from where the ranks are:
//   one node (and DTRAIN_TRANSPORT != tcp)      -> shared memory
//   one rank per node, or DTRAIN_TRANSPORT=tcp  -> TCP between all ranks
//   several nodes with several ranks each       -> hierarchical: allreduce and barrier reduce within
//      the node over shared memory, across nodes over TCP among the node leaders (local rank 0),
//      then broadcast back over shared memory; broadcast, allgather and reduce_scatter use TCP rings.
// Ranks of one node are assumed contiguous (node = rank - local_rank .. + local_size), as torchrun
// and `dtrain launch` number them.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dtrain/collectives.h"
#include "dtrain/rendezvous/store.hpp"
#include "engine.hpp"
#include "transport/transport.hpp"

namespace dtrain::coll {

struct CommConfig {
  int rank = 0;
  int size = 1;
  int local_rank = -1;  // -1: all ranks on one node
  int local_size = -1;
  std::string run_id = "default";
  int generation = 0;
  std::chrono::milliseconds timeout{300000};
  std::string transport = "auto";  // auto | tcp
  std::string advertise;           // empty: DTRAIN_SOCKET_ADDR, DTRAIN_LOCAL_ADDR, the store connection
  std::size_t shm_slot_bytes = 2 << 20;
  std::size_t tcp_chunk_bytes = 1 << 20;
  int spin_us = 50;
};

// Fills the tunables (timeout, transport, slot and chunk sizes, spin) from the DTRAIN_* registry.
// Throws ConfigError for malformed values.
void apply_params(CommConfig& cfg, double timeout_s_override);

class Communicator {
 public:
  // Bootstraps the engines through `store` (keys already scoped to run id + generation). Throws
  // CollError / dtrain::Error.
  Communicator(const CommConfig& cfg, std::shared_ptr<rdzv::Store> store);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return cfg_.rank; }
  int size() const { return cfg_.size; }
  int local_rank() const { return cfg_.local_rank; }
  rdzv::Store* store() const { return store_.get(); }
  std::chrono::milliseconds timeout() const { return cfg_.timeout; }
  // "shm", "tcp", "hierarchical" or "self".
  const char* engine_name() const { return transport_->name(); }

  void allreduce(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype, dtrain_op_t op);
  void broadcast(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype, int root);
  void allgather(const void* send, void* recv, std::size_t sendcount, dtrain_dtype_t dtype);
  void reduce_scatter(const void* send, void* recv, std::size_t recvcount, dtrain_dtype_t dtype, dtrain_op_t op);
  void barrier();

  // Marks the communicator failed (used by the C ABI for errors raised outside the CPU engines).
  void mark_failed(dtrain_status_t status, const std::string& msg) noexcept;
  bool failed() const { return failed_; }

 private:
  OpDesc next(OpKind kind, std::size_t count, dtrain_dtype_t dtype, dtrain_op_t op, int root);
  void check_usable() const;
  template <class F>
  void run(F&& body);

  CommConfig cfg_;
  std::shared_ptr<rdzv::Store> store_;
  std::unique_ptr<Transport> transport_;  // after store_: destroyed before it
  std::uint64_t seq_ = 0;
  bool failed_ = false;
  std::string failure_;
};

}  // namespace dtrain::coll
