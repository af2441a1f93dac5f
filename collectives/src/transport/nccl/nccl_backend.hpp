#pragma once
// The NCCL backend behind the C ABI: device buffers go here. Built only when DTRAIN_HAVE_NCCL;
// otherwise nccl_stub.cpp provides the same functions, reporting "built without NCCL".
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "dtrain/collectives.h"
#include "dtrain/rendezvous/store.hpp"

namespace dtrain::coll::nccl {

// True when this library was built with NCCL.
bool built_with_nccl();

// True when ptr is CUDA device (or managed) memory. Never throws; false without a driver/GPU.
bool is_device_pointer(const void* ptr);

struct Options {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int device = -1;                      // -1: LOCAL_RANK mod visible devices (unless the user set one)
  rdzv::Store* store = nullptr;         // already scoped to run id + generation
  std::chrono::milliseconds timeout{300000};
};

class Comm {
 public:
  virtual ~Comm() = default;
  // Each returns DTRAIN_SUCCESS or an error status after setting the thread-local last error.
  virtual dtrain_status_t allreduce(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype,
                                    dtrain_op_t op, void* stream) = 0;
  virtual dtrain_status_t broadcast(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype,
                                    int root, void* stream) = 0;
  virtual dtrain_status_t allgather(const void* send, void* recv, std::size_t sendcount,
                                    dtrain_dtype_t dtype, void* stream) = 0;
  virtual dtrain_status_t reduce_scatter(const void* send, void* recv, std::size_t recvcount,
                                         dtrain_dtype_t dtype, dtrain_op_t op, void* stream) = 0;
  virtual dtrain_status_t barrier() = 0;
};

// Rank 0 creates the unique id and publishes it in the store under "nccl/id"; the others wait for it.
// Throws dtrain::Error subclasses (the caller maps them to status codes).
std::unique_ptr<Comm> create(const Options& options);

}  // namespace dtrain::coll::nccl
