#pragma once
// The NCCL backend proper (built only with DTRAIN_HAVE_NCCL). Everything here throws nccl::Error
// (carrying its C ABI status) or dtrain::ConfigError; the C ABI's guard() turns that into status
// codes and the last-error string. Linked into the shared library (nccl_backend.cpp: create()) and,
// as the static library dtrain_nccl_core, into tests and tools without the C ABI.
// Files: nccl_core.cpp (errors, devices, type mapping), nccl_bootstrap.cpp (the unique-id exchange),
// nccl_comm.cpp (the communicator), nccl_exchange.cpp (the operations of C ABI 0.3), nccl_p2p.cpp
// (point-to-point and ncclCommSplit), driver_probe.cpp (device pointers without initialising CUDA).
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "../names.hpp"
#include "nccl_backend.hpp"

namespace dtrain::coll::nccl {

using Clock = std::chrono::steady_clock;

inline constexpr std::size_t kUniqueIdBytes = sizeof(ncclUniqueId);  // NCCL_UNIQUE_ID_BYTES = 128

// ---- errors ----
// "what: <ncclGetErrorString>: <ncclGetLastError text>" as nccl::Error(DTRAIN_ERR_NCCL).
[[noreturn]] void throw_nccl(ncclResult_t result, std::string_view what, ncclComm_t comm = nullptr);
// "what: <cudaGetErrorName> (<cudaGetErrorString>)" as nccl::Error(DTRAIN_ERR_CUDA); clears the
// runtime's last error.
[[noreturn]] void throw_cuda(cudaError_t error, std::string_view what);
// "<ncclGetErrorString>: <ncclGetLastError text>" and "<cudaGetErrorName> (<cudaGetErrorString>)".
std::string nccl_text(ncclResult_t result, ncclComm_t comm);
std::string cuda_text(cudaError_t error);
inline double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
void check_nccl(ncclResult_t result, std::string_view what, ncclComm_t comm = nullptr);
void check_cuda(cudaError_t error, std::string_view what);

// ---- devices ----
// Number of CUDA devices this process can use, probed once (cudaGetDeviceCount); 0 without a driver
// or GPU, with the reason in device_probe_error(). The CUDA error state is cleared.
int usable_device_count() noexcept;
const std::string& device_probe_error() noexcept;
// The device a communicator for `options` uses (see Options::device); throws nccl::Error
// (DTRAIN_ERR_CUDA) when there is none, ConfigError for a bad DTRAIN_CUDA_DEVICE.
int select_device(const Options& options);

// Makes `device` current for the scope and restores the caller's device afterwards.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    int current = -1;
    if (cudaGetDevice(&current) != cudaSuccess) {
      cudaGetLastError();
      current = -1;
    }
    if (current != device) {
      check_cuda(cudaSetDevice(device), fmt::format("cudaSetDevice({})", device));
      previous_ = current;
    }
  }
  ~DeviceGuard() {
    if (previous_ >= 0 && cudaSetDevice(previous_) != cudaSuccess) cudaGetLastError();
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// ---- type mapping ----
ncclDataType_t to_nccl(dtrain_dtype_t dtype);  // nccl::Error(DTRAIN_ERR_INVALID_ARGUMENT) if unknown
ncclRedOp_t to_nccl(dtrain_op_t op);  // band/bor/bxor: nccl::Error(DTRAIN_ERR_UNSUPPORTED)
// The NCCL op for op on dtype: bool (uint8 0/1) reduces or as max and and as min; bxor refused.
ncclRedOp_t to_nccl(dtrain_dtype_t dtype, dtrain_op_t op);
std::size_t dtype_size(dtrain_dtype_t dtype);

// ---- bootstrap: the unique id exchange (needs no GPU) ----
// Store keys for communicator `instance` ("nccl/id", "nccl/failed" for instance 0).
std::string id_key(int instance);
std::string failed_key(int instance);
// A fresh ncclUniqueId as 128 bytes (ncclGetUniqueId; this also starts NCCL's bootstrap root in
// this process, which is why only rank 0 calls it).
rdzv::Bytes new_unique_id();
// Rank 0 calls make_id() and publishes the bytes under id_key(instance); every other rank waits for
// that key until `deadline`. Returns the 128 bytes every rank then holds. The store is scoped to the
// run id and restart generation, so a waiting rank can never read an id from an earlier generation.
// If rank 0 fails instead (publish_failure before its id), the others fail at once with its message.
rdzv::Bytes exchange_unique_id(rdzv::Store& store, int rank, int instance, Clock::time_point deadline,
                               const std::function<rdzv::Bytes()>& make_id);
// Best effort, never throws: tells the other ranks that `rank` failed, so none of them waits for
// the deadline. Rank 0 also writes the message in place of the id when it never published one.
void publish_failure(rdzv::Store* store, int rank, int instance, const std::string& message) noexcept;
// The failure another rank published, or "" (a non-blocking store check).
std::string published_failure(rdzv::Store& store, int instance);

std::string hex(rdzv::ByteView bytes);

// ---- the communicator ----
class Communicator final : public Comm {
 public:
  // Selects the device, exchanges the id through options.store and joins the NCCL communicator in
  // non-blocking mode, polling until it is ready, another rank fails, or options.timeout passes;
  // on any failure the half-built communicator is aborted.
  explicit Communicator(const Options& options);
  // Joins with an id exchanged elsewhere, on `device` (already selected). Used by the above.
  Communicator(const rdzv::Bytes& id, const Options& options, int device);
  ~Communicator() override;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  void allreduce(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype, dtrain_op_t op,
                 void* stream, const double* premul = nullptr) override;
  void broadcast(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype, int root,
                 void* stream) override;
  void allgather(const void* send, void* recv, std::size_t sendcount, dtrain_dtype_t dtype, void* stream) override;
  void reduce_scatter(const void* send, void* recv, std::size_t recvcount, dtrain_dtype_t dtype,
                      dtrain_op_t op, void* stream, const double* premul = nullptr) override;
  void reduce(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype, dtrain_op_t op,
              const double* premul, int root, void* stream) override;
  void gather(const void* send, void* recv, std::size_t sendcount, dtrain_dtype_t dtype, int root,
              void* stream) override;
  void scatter(const void* send, void* recv, std::size_t recvcount, dtrain_dtype_t dtype, int root,
               void* stream) override;
  void alltoallv(const void* send, const std::size_t* sendcounts, const std::size_t* sdispls, void* recv,
                 const std::size_t* recvcounts, const std::size_t* rdispls, dtrain_dtype_t dtype,
                 void* stream) override;
  void barrier() override;
  void set_timeout(std::chrono::milliseconds timeout) override { timeout_ = timeout; }
  void sendrecv(const void* send, std::size_t sendcount, dtrain_dtype_t sendtype, int dest, void* recv,
                std::size_t recvcount, dtrain_dtype_t recvtype, int source, void* stream) override;
  std::unique_ptr<Comm> split(int color, int key, const Options& child) override;

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  int device() const noexcept { return device_; }
  bool aborted() const noexcept { return comm_ == nullptr; }
  ncclComm_t raw() const noexcept { return comm_; }

 private:
  static constexpr std::size_t kNoCount = ~std::size_t{0};
  // What an operation is, for messages (formatted only when something fails).
  struct Op {
    const char* name;
    std::size_t count = kNoCount;
    dtrain_dtype_t dtype = DTRAIN_FLOAT32;
    const char* detail = nullptr;  // the reduction op
  };

  // Adopts a communicator ncclCommSplit returned (still initialising) on `device`.
  struct Adopt {};
  Communicator(Adopt, ncclComm_t comm, const Options& options, int device);
  void join(const rdzv::Bytes& id, Clock::time_point deadline);
  void make_streams();
  void release() noexcept;
  // Runs enqueue (an NCCL call) on `stream` or the internal one with the device current, then
  // `after` once NCCL has enqueued; without a user stream waits for completion against the deadline.
  void run(const Op& op, void* stream, const std::function<ncclResult_t(cudaStream_t)>& enqueue,
           const std::function<void(cudaStream_t)>& after = {});
  void check_buffer(const void* ptr, const char* name, std::size_t bytes) const;
  void check_root(const Op& op, int root) const;
  // The NCCL reduction for op on dtype: a premultiplied sum made for this call when premul is set
  // (run_reduction releases it through release_op once the call is enqueued).
  ncclRedOp_t reduction(dtrain_dtype_t dtype, dtrain_op_t op, const double* premul);
  void release_op(ncclRedOp_t red, const double* premul) noexcept;
  // run() with the call's reduction (reduction()), released once the call is enqueued or failed.
  void run_reduction(const Op& op, void* stream, dtrain_dtype_t dtype, dtrain_op_t red_op, const double* premul,
                     const std::function<ncclResult_t(cudaStream_t, ncclRedOp_t)>& enqueue,
                     const std::function<void(cudaStream_t)>& after = {});
  void check_health(const Op& op);
  // Polls ncclCommGetAsyncError until the communicator leaves ncclInProgress; with watch_store
  // also gives up when another rank published a failure.
  void wait_ready(const Op& op, Clock::time_point deadline, bool watch_store);
  void wait_stream(const Op& op, cudaStream_t stream, Clock::time_point deadline);
  [[noreturn]] void abort_and_throw(dtrain_status_t status, const std::string& message);
  std::string describe(const Op& op) const;

  int rank_ = 0;
  int size_ = 1;
  int device_ = -1;
  int instance_ = 0;
  rdzv::Store* store_ = nullptr;
  std::chrono::milliseconds timeout_{300000};
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;  // internal stream for calls without one
  void* scratch_ = nullptr;        // one float on the device, for barrier()
  std::string failure_;            // why the communicator was aborted
  // The last buffers check_buffer() found on device_, so a training loop that reuses its buffers
  // pays no pointer query per call (a stale entry needs that exact address freed and reallocated
  // elsewhere; it would only cost the friendlier message, NCCL still rejects the buffer).
  mutable const void* checked_[2] = {nullptr, nullptr};
  mutable unsigned checked_next_ = 0;
};

}  // namespace dtrain::coll::nccl
