// The NCCL communicator: joins in non-blocking mode and polls (init, enqueue, stream completion)
// against the deadline, aborting the communicator when a peer fails or time runs out (see
// nccl_core.hpp).
#include <algorithm>
#include <cstring>
#include <thread>

#include "dtrain/common/log.hpp"
#include "nccl_core.hpp"

namespace dtrain::coll::nccl {
namespace {

using std::chrono::milliseconds;

// Spins (yielding) for the first few milliseconds, where most waits end, then sleeps with a
// doubling interval up to 1 ms, so a long or hung wait does not burn a core.
class Backoff {
 public:
  void pause() {
    auto elapsed = Clock::now() - start_;
    if (elapsed < std::chrono::milliseconds(2)) {
      std::this_thread::yield();
      return;
    }
    std::this_thread::sleep_for(sleep_);
    sleep_ = std::min(sleep_ * 2, std::chrono::microseconds(1000));
  }

 private:
  Clock::time_point start_ = Clock::now();
  std::chrono::microseconds sleep_{20};
};

// Polls done() (true once finished; it throws on a failure) with a backoff until it is true (returns
// true) or the deadline has passed (false). between(now) runs after each poll that found it unfinished
// before the deadline.
template <class Done, class Between>
bool poll_until(Clock::time_point deadline, Done&& done, Between&& between) {
  for (Backoff backoff;; backoff.pause()) {
    if (done()) return true;
    const auto now = Clock::now();
    if (now >= deadline) return false;
    between(now);
  }
}

}  // namespace

Communicator::Communicator(const Options& options)
    : rank_(options.rank), size_(options.size), instance_(options.instance), store_(options.store),
      timeout_(options.timeout) {
  if (options.store == nullptr) throw ConfigError("NCCL backend: no rendezvous store to exchange the unique id");
  if (size_ < 1 || rank_ < 0 || rank_ >= size_)
    throw ConfigError(fmt::format("NCCL backend: rank {} of {} is out of range", rank_, size_));
  const auto deadline = Clock::now() + timeout_;
  try {
    device_ = select_device(options);
    rdzv::Bytes id = exchange_unique_id(*store_, rank_, instance_, deadline, new_unique_id);
    join(id, deadline);
  } catch (const dtrain::Error& e) {
    publish_failure(store_, rank_, instance_, e.what());
    release();
    throw;
  }
}

Communicator::Communicator(const rdzv::Bytes& id, const Options& options, int device)
    : rank_(options.rank), size_(options.size), device_(device), instance_(options.instance),
      store_(options.store), timeout_(options.timeout) {
  try {
    join(id, Clock::now() + timeout_);
  } catch (const dtrain::Error&) {
    release();
    throw;
  }
}

Communicator::~Communicator() { release(); }

void Communicator::join(const rdzv::Bytes& id, Clock::time_point deadline) {
  DTRAIN_CHECK(id.size() == kUniqueIdBytes, "unique id of {} bytes", id.size());
  ncclUniqueId uid;
  std::memcpy(&uid, id.data(), sizeof uid);
  DeviceGuard guard(device_);
  make_streams();
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // init returns at once; wait_ready() polls against the deadline
  ncclResult_t r = ncclCommInitRankConfig(&comm_, size_, uid, rank_, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    std::string text = nccl_text(r, comm_);
    if (comm_ != nullptr) ncclCommAbort(comm_);
    comm_ = nullptr;
    throw Error(DTRAIN_ERR_NCCL, fmt::format("rank {} of {}, CUDA device {}: ncclCommInitRankConfig: {}",
                                             rank_, size_, device_, text));
  }
  wait_ready(Op{"ncclCommInitRankConfig"}, deadline, true);
  DTRAIN_INFO(coll, "rank {} of {}: NCCL communicator ready on CUDA device {}", rank_, size_, device_);
}

// The internal stream and the barrier's scratch float (the device is current).
void Communicator::make_streams() {
  check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamDefault), "cudaStreamCreate");
  check_cuda(cudaMalloc(&scratch_, sizeof(float)), "cudaMalloc(scratch)");
}

void Communicator::release() noexcept {
  try {
    if (comm_ != nullptr) {
      DeviceGuard guard(device_);
      // Finalize flushes outstanding work; a peer that is gone makes it wait, so bound it and abort.
      const auto deadline = Clock::now() + std::min<std::chrono::milliseconds>(timeout_, std::chrono::seconds(30));
      ncclResult_t r = ncclCommFinalize(comm_);
      ncclResult_t state = r;
      if (r == ncclSuccess || r == ncclInProgress)
        poll_until(
            deadline,
            [&] {
              if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) state = ncclInternalError;
              return state != ncclInProgress;
            },
            [](Clock::time_point) {});
      if ((r == ncclSuccess || r == ncclInProgress) && state == ncclSuccess)
        ncclCommDestroy(comm_);
      else
        ncclCommAbort(comm_);
      comm_ = nullptr;
    }
  } catch (const std::exception& e) {
    DTRAIN_WARN(coll, "rank {}: releasing the NCCL communicator: {}", rank_, e.what());
    if (comm_ != nullptr) ncclCommAbort(comm_);
    comm_ = nullptr;
  }
  if (scratch_ != nullptr && cudaFree(scratch_) != cudaSuccess) cudaGetLastError();
  scratch_ = nullptr;
  if (stream_ != nullptr && cudaStreamDestroy(stream_) != cudaSuccess) cudaGetLastError();
  stream_ = nullptr;
}

std::string Communicator::describe(const Op& op) const {
  std::string text = fmt::format("NCCL {}", op.name);
  if (op.count != kNoCount) text += fmt::format(" of {} {}", op.count, dtype_name(op.dtype));
  if (op.detail != nullptr) text += fmt::format(" ({})", op.detail);
  return text + fmt::format(" on rank {} of {}, CUDA device {}", rank_, size_, device_);
}

void Communicator::abort_and_throw(dtrain_status_t status, const std::string& message) {
  failure_ = message;
  if (comm_ != nullptr) {
    ncclCommAbort(comm_);
    comm_ = nullptr;
  }
  throw Error(status, message);
}

void Communicator::check_health(const Op& op) {
  if (comm_ == nullptr)
    throw Error(DTRAIN_ERR_ABORTED,
                fmt::format("{}: the NCCL communicator was aborted earlier ({}); destroy it and create a new one",
                            describe(op), failure_));
  ncclResult_t state = ncclSuccess;
  ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
  if (r != ncclSuccess) abort_and_throw(DTRAIN_ERR_NCCL, fmt::format("{}: ncclCommGetAsyncError: {}", describe(op), nccl_text(r, comm_)));
  if (state != ncclSuccess && state != ncclInProgress)
    abort_and_throw(DTRAIN_ERR_NCCL,
                    fmt::format("{}: an earlier operation failed asynchronously: {}", describe(op), nccl_text(state, comm_)));
}

void Communicator::wait_ready(const Op& op, Clock::time_point deadline, bool watch_store) {
  const auto start = Clock::now();
  auto next_store_check = start + milliseconds(100);
  const auto ready = [&] {
    ncclResult_t state = ncclInProgress;
    ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
    if (r != ncclSuccess)
      abort_and_throw(DTRAIN_ERR_NCCL, fmt::format("{}: ncclCommGetAsyncError: {}", describe(op), nccl_text(r, comm_)));
    if (state != ncclSuccess && state != ncclInProgress)
      abort_and_throw(DTRAIN_ERR_NCCL, fmt::format("{}: {}", describe(op), nccl_text(state, comm_)));
    return state == ncclSuccess;
  };
  const auto check_store = [&](Clock::time_point now) {
    if (!watch_store || store_ == nullptr || now < next_store_check) return;
    next_store_check = now + milliseconds(100);
    std::string failure;
    try {
      failure = published_failure(*store_, instance_);
    } catch (const std::exception& e) {
      DTRAIN_DEBUG(coll, "rank {}: checking the store for NCCL failures: {}", rank_, e.what());
    }
    if (!failure.empty())
      abort_and_throw(DTRAIN_ERR_PEER, fmt::format("{}: abandoned because {}", describe(op), failure));
  };
  if (!poll_until(deadline, ready, check_store))
    abort_and_throw(DTRAIN_ERR_TIMEOUT,
                    fmt::format("{}: not complete after {:.1f} s (not every rank joined or a peer is stuck); "
                                "the NCCL communicator was aborted",
                                describe(op), seconds(Clock::now() - start)));
}

void Communicator::wait_stream(const Op& op, cudaStream_t stream, Clock::time_point deadline) {
  const auto start = Clock::now();
  const auto done = [&] {
    cudaError_t e = cudaStreamQuery(stream);
    if (e == cudaSuccess) return true;
    if (e != cudaErrorNotReady) {
      cudaGetLastError();
      abort_and_throw(DTRAIN_ERR_CUDA, fmt::format("{}: cudaStreamQuery: {}", describe(op), cuda_text(e)));
    }
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &state) == ncclSuccess && state != ncclSuccess && state != ncclInProgress)
      abort_and_throw(DTRAIN_ERR_NCCL, fmt::format("{}: {}", describe(op), nccl_text(state, comm_)));
    return false;
  };
  if (!poll_until(deadline, done, [](Clock::time_point) {}))
    abort_and_throw(DTRAIN_ERR_TIMEOUT,
                    fmt::format("{}: not complete after {:.1f} s (a peer rank is stuck, gone, or in a different "
                                "collective); the NCCL communicator was aborted: destroy it",
                                describe(op), seconds(Clock::now() - start)));
}

void Communicator::check_buffer(const void* ptr, const char* name, std::size_t bytes) const {
  if (bytes == 0) return;
  if (ptr == nullptr)
    throw Error(DTRAIN_ERR_INVALID_ARGUMENT, fmt::format("NCCL backend, rank {}: {} is NULL with {} bytes to move", rank_, name, bytes));
  if (ptr == checked_[0] || ptr == checked_[1]) return;
  cudaPointerAttributes a{};
  cudaError_t e = cudaPointerGetAttributes(&a, ptr);
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw Error(DTRAIN_ERR_INVALID_ARGUMENT,
                fmt::format("NCCL backend, rank {}: {} is not CUDA memory: {}", rank_, name, cuda_text(e)));
  }
  if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)
    throw Error(DTRAIN_ERR_INVALID_ARGUMENT,
                fmt::format("NCCL backend, rank {}: {} is host memory while the other buffer is on the GPU; pass "
                            "both buffers on the GPU (NCCL) or both on the host (CPU engine)",
                            rank_, name));
  if (a.type == cudaMemoryTypeDevice && a.device != device_)
    throw Error(DTRAIN_ERR_INVALID_ARGUMENT,
                fmt::format("NCCL backend, rank {}: {} is on CUDA device {} but the communicator uses device {}; "
                            "call cudaSetDevice (or set DTRAIN_CUDA_DEVICE) before the first device collective",
                            rank_, name, a.device, device_));
  checked_[checked_next_] = ptr;
  checked_next_ ^= 1u;
}

void Communicator::run(const Op& op, void* stream, const std::function<ncclResult_t(cudaStream_t)>& enqueue,
                       const std::function<void(cudaStream_t)>& after) {
  check_health(op);
  DeviceGuard guard(device_);
  cudaStream_t s = stream != nullptr ? static_cast<cudaStream_t>(stream) : stream_;
  const auto deadline = Clock::now() + timeout_;
  ncclResult_t r = enqueue(s);
  if (r == ncclInProgress) {
    wait_ready(op, deadline, false);
  } else if (r == ncclInvalidArgument || r == ncclInvalidUsage) {
    throw Error(DTRAIN_ERR_NCCL, fmt::format("{}: {}", describe(op), nccl_text(r, comm_)));  // comm still fine
  } else if (r != ncclSuccess) {
    abort_and_throw(DTRAIN_ERR_NCCL, fmt::format("{}: {}", describe(op), nccl_text(r, comm_)));
  }
  if (after) after(s);
  if (stream == nullptr) wait_stream(op, s, deadline);
}

void Communicator::allreduce(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype,
                             dtrain_op_t op, void* stream, const double* premul) {
  const Op info{"allreduce", count, dtype, premul ? "premul_sum" : op_name(op)};
  const ncclDataType_t type = to_nccl(dtype);
  const std::size_t bytes = count * dtype_size(dtype);
  check_buffer(send, "sendbuf", bytes);
  if (recv != send) check_buffer(recv, "recvbuf", bytes);
  run_reduction(info, stream, dtype, op, premul, [&](cudaStream_t s, ncclRedOp_t red) {
    return ncclAllReduce(send, recv, count, type, red, comm_, s);
  });
}

void Communicator::broadcast(const void* send, void* recv, std::size_t count, dtrain_dtype_t dtype, int root,
                             void* stream) {
  const Op info{"broadcast", count, dtype, nullptr};
  if (root < 0 || root >= size_)
    throw Error(DTRAIN_ERR_INVALID_ARGUMENT,
                fmt::format("{}: root {} is not a rank of this communicator (0..{})", describe(info), root, size_ - 1));
  const ncclDataType_t type = to_nccl(dtype);
  const std::size_t bytes = count * dtype_size(dtype);
  if (rank_ == root) check_buffer(send, "sendbuf", bytes);
  if (recv != send) check_buffer(recv, "recvbuf", bytes);
  run(info, stream, [&](cudaStream_t s) { return ncclBroadcast(send, recv, count, type, root, comm_, s); });
}

// In place is NCCL's layout (send == recv + rank * sendcount, passed through as is); send == recv is
// accepted too and means this rank's contribution is the first sendcount elements of recv.
void Communicator::allgather(const void* send, void* recv, std::size_t sendcount, dtrain_dtype_t dtype,
                             void* stream) {
  const Op info{"allgather", sendcount, dtype, nullptr};
  const ncclDataType_t type = to_nccl(dtype);
  const std::size_t bytes = sendcount * dtype_size(dtype);
  check_buffer(recv, "recvbuf", bytes * static_cast<std::size_t>(size_));
  auto* slot = static_cast<char*>(recv) + bytes * static_cast<std::size_t>(rank_);
  const bool in_place = send == recv && rank_ != 0 && bytes != 0;
  if (!in_place && send != slot) check_buffer(send, "sendbuf", bytes);
  run(info, stream, [&](cudaStream_t s) {
    if (in_place) check_cuda(cudaMemcpyAsync(slot, recv, bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
    return ncclAllGather(in_place ? slot : send, recv, sendcount, type, comm_, s);
  });
}

// In place (send == recv): the result lands in the first recvcount elements of recv.
void Communicator::reduce_scatter(const void* send, void* recv, std::size_t recvcount, dtrain_dtype_t dtype,
                                  dtrain_op_t op, void* stream, const double* premul) {
  const Op info{"reduce_scatter", recvcount, dtype, premul ? "premul_sum" : op_name(op)};
  const ncclDataType_t type = to_nccl(dtype);
  const std::size_t bytes = recvcount * dtype_size(dtype);
  check_buffer(send, "sendbuf", bytes * static_cast<std::size_t>(size_));
  const auto* slot = static_cast<const char*>(send) + bytes * static_cast<std::size_t>(rank_);
  const bool in_place = send == recv && rank_ != 0 && bytes != 0;
  if (!in_place && recv != slot) check_buffer(recv, "recvbuf", bytes);
  void* target = in_place ? const_cast<char*>(slot) : recv;
  run_reduction(
      info, stream, dtype, op, premul,
      [&](cudaStream_t s, ncclRedOp_t red) { return ncclReduceScatter(send, target, recvcount, type, red, comm_, s); },
      [&](cudaStream_t s) {
        if (in_place) check_cuda(cudaMemcpyAsync(recv, slot, bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
      });
}

void Communicator::barrier() {
  const Op info{"barrier"};
  run(info, nullptr, [&](cudaStream_t s) {
    return ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, s);
  });
}


}  // namespace dtrain::coll::nccl
