#pragma once
// The NCCL backend behind the C ABI: device buffers go here. Built only when DTRAIN_HAVE_NCCL;
// otherwise nccl_stub.cpp provides the same functions, reporting "built without NCCL".
//
// Routing (handle.cpp's on_device): a call with a buffer on a device goes to a Comm created on first
// use (create() below); host buffers stay with the CPU engine.
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "../call.hpp"
#include "dtrain/collectives.h"
#include "dtrain/common/errors.hpp"
#include "dtrain/rendezvous/store/store.hpp"

namespace dtrain::coll::nccl {

// What create() and the backend throw for NCCL, CUDA, timeout and "built without NCCL" failures:
// status() is the C ABI status to return (DTRAIN_ERR_NCCL, DTRAIN_ERR_CUDA, DTRAIN_ERR_TIMEOUT,
// DTRAIN_ERR_PEER, DTRAIN_ERR_UNSUPPORTED, DTRAIN_ERR_INVALID_ARGUMENT, ...) and what() the text for
// dtrain_last_error(). A CollError, so the C ABI's guard maps it like the CPU engines' errors.
class Error : public CollError {
 public:
  using CollError::CollError;
};

// True when this library was built with NCCL.
bool built_with_nccl();

// True when ptr is CUDA device (or managed) memory. Never throws; false without a driver/GPU.
// Cheap for host buffers: while the process has not loaded the CUDA driver (libcuda.so.1) no
// device memory can exist, and this returns false without initialising CUDA.
bool is_device_pointer(const void* ptr);

// The CUDA device ordinal that owns ptr, or -1 for host memory (or without CUDA). Never throws.
int device_of(const void* ptr);

struct Options {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  // -1: DTRAIN_CUDA_DEVICE if set, else the device the calling thread already uses (the user called
  // cudaSetDevice), else LOCAL_RANK mod visible devices. Passing device_of(buffer) pins the
  // communicator to the device the first buffer lives on.
  int device = -1;
  rdzv::Store* store = nullptr;         // already scoped to run id + generation
  std::chrono::milliseconds timeout{300000};
  // Distinguishes several NCCL communicators created in one generation on the same store: instance
  // 0 uses the keys "nccl/id" and "nccl/failed", instance k > 0 "nccl/<k>/id" and "nccl/<k>/failed".
  // Every rank must pass the same value.
  int instance = 0;
};

// The seam the C ABI calls; nccl_core's Communicator implements it. Like the CPU engines, every call
// returns with the result enqueued (or, without a stream, in recv) or throws: nccl::Error with its C
// ABI status for NCCL, CUDA, timeout and argument failures; the C ABI's guard() turns them into
// statuses.
class Comm {
 public:
  virtual ~Comm() = default;
  // stream: a cudaStream_t, or nullptr for an internal stream and a call that returns only once the
  // result is in recv (polled against the deadline; on timeout the communicator is aborted).
  // premul: the scale when op is a premultiplied sum (ncclRedOpCreatePreMulSum), else null.
  virtual void allreduce(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype, dtrain_op_t op,
                         void* stream, const double* premul = nullptr) = 0;
  virtual void broadcast(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype, int root,
                         void* stream) = 0;
  virtual void allgather(const void* send, void* recv, std::size_t sendcount, dtrain_dtype_t dtype,
                         void* stream) = 0;
  virtual void reduce_scatter(const void* send, void* recv, std::size_t recvcount, dtrain_dtype_t dtype,
                              dtrain_op_t op, void* stream, const double* premul = nullptr) = 0;
  // Since 0.3 (nccl_exchange.cpp): ncclReduce; gather, scatter and alltoallv as ncclSend/ncclRecv in one
  // group (counts and displacements in elements, size() entries each).
  virtual void reduce(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype, dtrain_op_t op,
                      const double* premul, int root, void* stream) = 0;
  virtual void gather(const void* send, void* recv, std::size_t sendcount, dtrain_dtype_t dtype, int root,
                      void* stream) = 0;
  virtual void scatter(const void* send, void* recv, std::size_t recvcount, dtrain_dtype_t dtype, int root,
                       void* stream) = 0;
  virtual void alltoallv(const void* send, const std::size_t* sendcounts, const std::size_t* sdispls, void* recv,
                         const std::size_t* recvcounts, const std::size_t* rdispls, dtrain_dtype_t dtype,
                         void* stream) = 0;
  virtual void barrier() = 0;
  // The deadline of later calls (dtrain_comm_set_timeout).
  virtual void set_timeout(std::chrono::milliseconds timeout) = 0;
  // ncclSend of sendcount elements to dest and ncclRecv of recvcount from source in one
  // ncclGroupStart/End, so both progress together (a peer of -1 skips that direction). The C ABI
  // has already matched both ends' descriptions through the CPU communicator.
  virtual void sendrecv(const void* send, std::size_t sendcount, dtrain_dtype_t sendtype, int dest, void* recv,
                        std::size_t recvcount, dtrain_dtype_t recvtype, int source, void* stream) = 0;
  // ncclCommSplit, collective over this communicator: color < 0 joins none (returns null). `child`:
  // the rank and size the new communicator must have (the CPU split's), its timeout; the device is
  // this communicator's.
  virtual std::unique_ptr<Comm> split(int color, int key, const Options& child) = 0;
};

// Rank 0 creates the unique id and publishes it in the store under "nccl/id"; the others wait for it.
// Throws nccl::Error (with its status) for NCCL/CUDA/timeout failures and dtrain::ConfigError for
// bad options or DTRAIN_CUDA_DEVICE; never hangs past options.timeout.
std::unique_ptr<Comm> create(const Options& options);

}  // namespace dtrain::coll::nccl
