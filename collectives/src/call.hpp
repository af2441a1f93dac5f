#pragma once
// One call as the engines (and the NCCL backend) see it: OpDesc for a collective, P2pDesc and
// P2pMsg for a message, each with the fingerprint ranks compare; CollError, what a failed call
// throws; the dtype and op helpers.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "dtrain/collectives.h"
#include "names.hpp"
#include "dtrain/common/errors.hpp"

namespace dtrain::coll {

using Clock = std::chrono::steady_clock;

// Clock::now() as of the kernel's last tick (CLOCK_MONOTONIC_COARSE: a few ns through the vDSO,
// against tens for Clock::now() on some VMs), so up to a few ms behind it: for deadlines and
// timestamps read in seconds, taken once per call.
Clock::time_point coarse_now() noexcept;

// The values are the progress page's (dtrain/common/progress_page.hpp, progress::Op).
enum class OpKind : std::uint8_t {
  barrier = 1, allreduce, broadcast, allgather, reduce_scatter, comm_split, send, recv,
  reduce, gather, scatter, alltoall, alltoallv, recv_any
};

const char* op_kind_name(OpKind kind);
std::size_t dtype_size(dtrain_dtype_t dtype);
bool valid_dtype(int dtype);
// The plain reductions (DTRAIN_SUM .. DTRAIN_BXOR); premultiplied sums are the communicator's handles.
bool valid_redop(int op);
bool is_floating(dtrain_dtype_t dtype);
bool is_bitwise(dtrain_op_t op);

// One collective call as every rank must see it. The two words are the per-call fingerprint the
// engines compare across ranks (count, kind, dtype, op, root), seq is the call's sequence number.
struct OpDesc {
  std::uint64_t seq = 0;
  OpKind kind = OpKind::barrier;
  dtrain_dtype_t dtype = DTRAIN_UINT8;
  dtrain_op_t op = DTRAIN_SUM;
  int root = 0;
  std::size_t count = 0;
  // A premultiplied sum: the communicator scaled the input, the engine sums (op is DTRAIN_SUM), and
  // the fingerprint says premul_sum, so a rank that sums plainly is a mismatch.
  bool premul = false;
  Clock::time_point start{};     // when the call began (coarse_now())
  Clock::time_point deadline{};  // start + the communicator's timeout

  // The deadline's length, for messages (dtrain_comm_set_timeout may change it between calls).
  std::chrono::milliseconds timeout() const { return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - start); }

  std::uint64_t fp0() const { return count; }
  std::uint64_t fp1() const {
    return static_cast<std::uint64_t>(kind) | (static_cast<std::uint64_t>(dtype) << 8) |
           (static_cast<std::uint64_t>(premul ? DTRAIN_PREMUL_SUM : op) << 16) | (static_cast<std::uint64_t>(static_cast<std::uint32_t>(root)) << 32);
  }
  // "allreduce #12 (count 1000, float32, sum)"
  std::string text() const;
};

// Describes the call behind a fingerprint, for mismatch messages.
std::string describe_fingerprint(std::uint64_t fp0, std::uint64_t fp1);

// The error the engines throw: a status for the C ABI plus the message.
class CollError : public Error {
 public:
  CollError(dtrain_status_t status, const std::string& msg) : Error(msg), status_(status) {}
  dtrain_status_t status() const { return status_; }

 private:
  dtrain_status_t status_;
};

// One point-to-point message as both of its ends must describe it: the seq-th message (from 1) from
// one rank to another carries tag, count and dtype; the receiver compares its own description with
// the sender's (fp0, fp1) before it takes a byte. `device`: the payload travels through NCCL and
// only this description through the CPU engine (bytes() is then 0).
struct P2pDesc {
  std::uint64_t seq = 0;
  int tag = 0;
  std::size_t count = 0;
  dtrain_dtype_t dtype = DTRAIN_UINT8;
  bool device = false;
  Clock::time_point deadline{};
  std::chrono::milliseconds timeout{0};  // the deadline's length, for messages

  std::size_t bytes() const;
  std::uint64_t fp0() const { return count; }
  std::uint64_t fp1() const {
    return static_cast<std::uint64_t>(dtype) | (static_cast<std::uint64_t>(device) << 8) |
           (static_cast<std::uint64_t>(static_cast<std::uint32_t>(tag)) << 32);
  }
  // "#3 (tag 5, count 100, float32)"
  std::string text() const;
};

// Describes the message behind a point-to-point fingerprint, e.g. "#3 (tag 5, count 100, float32)".
std::string describe_p2p(std::uint64_t seq, std::uint64_t fp0, std::uint64_t fp1);

// One direction of a point-to-point call in flight: the message, the peer (a group rank, never the
// caller's own) and the user's buffer (src for a send, dst for a receive).
struct P2pMsg {
  P2pDesc d;
  int peer = -1;
  const void* src = nullptr;
  void* dst = nullptr;
};

// Seconds as text for messages: "30 s", "0.5 s", "1e+09 s" (the longest deadline).
std::string seconds_text(std::chrono::milliseconds ms);

}  // namespace dtrain::coll
