#include "nccl_core.hpp"

#include <algorithm>
#include <cstring>
#include <thread>

#include "driver_probe.hpp"
#include "dtrain/common/log.hpp"
#include "dtrain/common/params.hpp"

namespace dtrain::coll::nccl {
namespace {

using std::chrono::milliseconds;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::string nccl_text(ncclResult_t result, ncclComm_t comm) {
  std::string text = ncclGetErrorString(result);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && *last != '\0') text += fmt::format(": {}", last);
  return text;
}

std::string cuda_text(cudaError_t error) {
  return fmt::format("{} ({})", cudaGetErrorName(error), cudaGetErrorString(error));
}

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

struct Probe {
  int count = 0;
  std::string error;
};

const Probe& probe() noexcept {
  static const Probe result = [] {
    Probe p;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      cudaGetLastError();
      p.error = fmt::format("cudaGetDeviceCount failed: {}", cuda_text(e));
    } else if (n <= 0) {
      p.error = "cudaGetDeviceCount found no CUDA device (check CUDA_VISIBLE_DEVICES)";
    } else {
      p.count = n;
    }
    return p;
  }();
  return result;
}

// True when the user has already made `device` usable in this process (cudaSetDevice initialises
// the primary context since CUDA 12), read through the driver the runtime has loaded.
bool primary_context_active(int device) noexcept {
  using GetState = int (*)(int, unsigned*, int*);
  auto get = reinterpret_cast<GetState>(cuda_driver_symbol("cuDevicePrimaryCtxGetState"));
  unsigned flags = 0;
  int active = 0;
  return get != nullptr && get(device, &flags, &active) == 0 && active != 0;
}

constexpr char kFailureMark[] = "!nccl-failed:";

std::string key_prefix(int instance) { return instance == 0 ? "nccl" : fmt::format("nccl/{}", instance); }

[[noreturn]] void rethrow_store_error(std::string_view what) {
  try {
    throw;
  } catch (const TimeoutError& e) {
    throw Error(DTRAIN_ERR_TIMEOUT, fmt::format("{}: {}", what, e.what()));
  } catch (const AuthError& e) {
    throw Error(DTRAIN_ERR_AUTH, fmt::format("{}: {}", what, e.what()));
  } catch (const IoError& e) {
    throw Error(DTRAIN_ERR_PEER, fmt::format("{}: {}", what, e.what()));
  }
}

}  // namespace

// ---- errors ----

void throw_nccl(ncclResult_t result, std::string_view what, ncclComm_t comm) {
  throw Error(DTRAIN_ERR_NCCL, fmt::format("{}: {}", what, nccl_text(result, comm)));
}

void throw_cuda(cudaError_t error, std::string_view what) {
  cudaGetLastError();
  throw Error(DTRAIN_ERR_CUDA, fmt::format("{}: {}", what, cuda_text(error)));
}

void check_nccl(ncclResult_t result, std::string_view what, ncclComm_t comm) {
  if (result != ncclSuccess) throw_nccl(result, what, comm);
}

void check_cuda(cudaError_t error, std::string_view what) {
  if (error != cudaSuccess) throw_cuda(error, what);
}

// ---- the seam's pointer questions ----

bool built_with_nccl() { return true; }

int device_of(const void* ptr) {
  // No driver loaded: no CUDA memory can exist, and CUDA stays uninitialised for host-only users.
  if (ptr == nullptr || !cuda_driver_loaded() || probe().count == 0) return -1;
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  if (attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged)
    return attributes.device;
  return -1;
}

bool is_device_pointer(const void* ptr) { return device_of(ptr) >= 0; }

// ---- devices ----

int usable_device_count() noexcept { return probe().count; }
const std::string& device_probe_error() noexcept { return probe().error; }

int select_device(const Options& options) {
  const int n = usable_device_count();
  if (n == 0)
    throw Error(DTRAIN_ERR_CUDA, fmt::format("rank {}: no usable CUDA device for the NCCL backend ({}); "
                                             "device buffers need a GPU and its driver",
                                             options.rank, device_probe_error()));
  if (options.device >= 0) {
    if (options.device >= n)
      throw Error(DTRAIN_ERR_INVALID_ARGUMENT,
                  fmt::format("rank {}: CUDA device {} asked for, but this process sees {} device(s)",
                              options.rank, options.device, n));
    return options.device;
  }
  if (!param_string("DTRAIN_CUDA_DEVICE").empty()) {
    std::int64_t d = param_int("DTRAIN_CUDA_DEVICE");
    if (d < 0 || d >= n)
      throw ConfigError(fmt::format("DTRAIN_CUDA_DEVICE={}: this process sees {} CUDA device(s), 0..{} "
                                    "(after CUDA_VISIBLE_DEVICES); unset it to use LOCAL_RANK mod {}",
                                    d, n, n - 1, n));
    return static_cast<int>(d);
  }
  int current = 0;
  check_cuda(cudaGetDevice(&current), "cudaGetDevice");
  if (current != 0 || primary_context_active(current)) return current;  // the user chose it
  return (options.local_rank < 0 ? 0 : options.local_rank) % n;
}

// ---- type mapping ----

ncclDataType_t to_nccl(dtrain_dtype_t dtype) {
  switch (dtype) {
    case DTRAIN_INT8: return ncclInt8;
    case DTRAIN_UINT8: return ncclUint8;
    case DTRAIN_INT32: return ncclInt32;
    case DTRAIN_INT64: return ncclInt64;
    case DTRAIN_FLOAT16: return ncclFloat16;
    case DTRAIN_BFLOAT16: return ncclBfloat16;
    case DTRAIN_FLOAT32: return ncclFloat32;
    case DTRAIN_FLOAT64: return ncclFloat64;
  }
  throw Error(DTRAIN_ERR_INVALID_ARGUMENT,
              fmt::format("dtype {} is not a dtrain_dtype_t (DTRAIN_INT8 .. DTRAIN_FLOAT64)", static_cast<int>(dtype)));
}

ncclRedOp_t to_nccl(dtrain_op_t op) {
  switch (op) {
    case DTRAIN_SUM: return ncclSum;
    case DTRAIN_PROD: return ncclProd;
    case DTRAIN_MIN: return ncclMin;
    case DTRAIN_MAX: return ncclMax;
    case DTRAIN_AVG: return ncclAvg;
  }
  throw Error(DTRAIN_ERR_INVALID_ARGUMENT,
              fmt::format("op {} is not a dtrain_op_t (DTRAIN_SUM .. DTRAIN_AVG)", static_cast<int>(op)));
}

std::size_t dtype_size(dtrain_dtype_t dtype) {
  switch (dtype) {
    case DTRAIN_INT8: case DTRAIN_UINT8: return 1;
    case DTRAIN_FLOAT16: case DTRAIN_BFLOAT16: return 2;
    case DTRAIN_INT32: case DTRAIN_FLOAT32: return 4;
    case DTRAIN_INT64: case DTRAIN_FLOAT64: return 8;
  }
  to_nccl(dtype);  // throws the invalid-dtype error
  return 0;
}

// ---- bootstrap ----

std::string id_key(int instance) { return key_prefix(instance) + "/id"; }
std::string failed_key(int instance) { return key_prefix(instance) + "/failed"; }

rdzv::Bytes new_unique_id() {
  ncclUniqueId id;
  check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  const auto* p = reinterpret_cast<const std::uint8_t*>(&id);
  return rdzv::Bytes(p, p + sizeof id);
}

rdzv::Bytes exchange_unique_id(rdzv::Store& store, int rank, int instance, Clock::time_point deadline,
                               const std::function<rdzv::Bytes()>& make_id) {
  const std::string key = id_key(instance);
  if (rank == 0) {
    rdzv::Bytes id = make_id();
    DTRAIN_CHECK(id.size() == kUniqueIdBytes, "unique id of {} bytes", id.size());
    try {
      store.set(key, id);
    } catch (const dtrain::Error&) {
      rethrow_store_error(fmt::format("rank 0: publishing the NCCL unique id under store key '{}'", key));
    }
    DTRAIN_DEBUG(coll, "rank 0 published the NCCL unique id under '{}'", key);
    return id;
  }
  auto left = std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
  rdzv::Bytes value;
  try {
    value = store.get(key, left);
  } catch (const TimeoutError&) {
    throw Error(DTRAIN_ERR_TIMEOUT,
                fmt::format("rank {}: no NCCL unique id from rank 0 under store key '{}' after {:.1f} s; "
                            "rank 0 has not reached its first device collective (is it running? did it "
                            "fail?)",
                            rank, key, seconds(left)));
  } catch (const dtrain::Error&) {
    rethrow_store_error(fmt::format("rank {}: waiting for the NCCL unique id under store key '{}'", rank, key));
  }
  const std::size_t mark = sizeof kFailureMark - 1;
  if (value.size() != kUniqueIdBytes && value.size() >= mark &&
      std::memcmp(value.data(), kFailureMark, mark) == 0)
    throw Error(DTRAIN_ERR_PEER,
                fmt::format("rank {}: rank 0 could not set up NCCL: {}", rank,
                            rdzv::to_string(rdzv::ByteView(value).subspan(mark))));
  if (value.size() != kUniqueIdBytes)
    throw Error(DTRAIN_ERR_INTERNAL,
                fmt::format("rank {}: store key '{}' holds {} bytes, not a {}-byte NCCL unique id (does "
                            "another program write this key?)",
                            rank, key, value.size(), kUniqueIdBytes));
  return value;
}

void publish_failure(rdzv::Store* store, int rank, int instance, const std::string& message) noexcept {
  if (store == nullptr) return;
  try {
    std::string text = fmt::format("rank {}: {}", rank, message);
    store->compare_set(failed_key(instance), {}, rdzv::as_bytes(text));
    if (rank == 0) {
      std::string marked = kFailureMark + message;
      if (marked.size() == kUniqueIdBytes) marked += ' ';
      store->compare_set(id_key(instance), {}, rdzv::as_bytes(marked));  // only if no id was published
    }
  } catch (const std::exception& e) {
    DTRAIN_DEBUG(coll, "could not publish the NCCL failure of rank {}: {}", rank, e.what());
  }
}

std::string published_failure(rdzv::Store& store, int instance) {
  const std::string key = failed_key(instance);
  const std::string keys[] = {key};
  if (!store.check(keys)) return {};
  return rdzv::to_string(store.get(key, milliseconds(5000)));
}

std::string hex(rdzv::ByteView bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (std::uint8_t b : bytes) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

// ---- the communicator ----

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
  check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamDefault), "cudaStreamCreate");
  check_cuda(cudaMalloc(&scratch_, sizeof(float)), "cudaMalloc(scratch)");
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

void Communicator::release() noexcept {
  try {
    if (comm_ != nullptr) {
      DeviceGuard guard(device_);
      // Finalize flushes outstanding work; a peer that is gone makes it wait, so bound it and abort.
      const auto deadline = Clock::now() + std::min<std::chrono::milliseconds>(timeout_, std::chrono::seconds(30));
      ncclResult_t r = ncclCommFinalize(comm_);
      ncclResult_t state = r;
      for (Backoff b; r == ncclSuccess || r == ncclInProgress;) {
        if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) state = ncclInternalError;
        if (state != ncclInProgress) break;
        if (Clock::now() >= deadline) break;
        b.pause();
      }
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
  for (Backoff backoff;;) {
    ncclResult_t state = ncclInProgress;
    ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
    if (r != ncclSuccess)
      abort_and_throw(DTRAIN_ERR_NCCL, fmt::format("{}: ncclCommGetAsyncError: {}", describe(op), nccl_text(r, comm_)));
    if (state == ncclSuccess) return;
    if (state != ncclInProgress)
      abort_and_throw(DTRAIN_ERR_NCCL, fmt::format("{}: {}", describe(op), nccl_text(state, comm_)));
    const auto now = Clock::now();
    if (now >= deadline)
      abort_and_throw(DTRAIN_ERR_TIMEOUT,
                      fmt::format("{}: not complete after {:.1f} s (not every rank joined or a peer is stuck); "
                                  "the NCCL communicator was aborted",
                                  describe(op), seconds(now - start)));
    if (watch_store && store_ != nullptr && now >= next_store_check) {
      next_store_check = now + milliseconds(100);
      std::string failure;
      try {
        failure = published_failure(*store_, instance_);
      } catch (const std::exception& e) {
        DTRAIN_DEBUG(coll, "rank {}: checking the store for NCCL failures: {}", rank_, e.what());
      }
      if (!failure.empty())
        abort_and_throw(DTRAIN_ERR_PEER, fmt::format("{}: abandoned because {}", describe(op), failure));
    }
    backoff.pause();
  }
}

void Communicator::wait_stream(const Op& op, cudaStream_t stream, Clock::time_point deadline) {
  const auto start = Clock::now();
  for (Backoff backoff;;) {
    cudaError_t e = cudaStreamQuery(stream);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) {
      cudaGetLastError();
      abort_and_throw(DTRAIN_ERR_CUDA, fmt::format("{}: cudaStreamQuery: {}", describe(op), cuda_text(e)));
    }
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &state) == ncclSuccess && state != ncclSuccess && state != ncclInProgress)
      abort_and_throw(DTRAIN_ERR_NCCL, fmt::format("{}: {}", describe(op), nccl_text(state, comm_)));
    const auto now = Clock::now();
    if (now >= deadline)
      abort_and_throw(DTRAIN_ERR_TIMEOUT,
                      fmt::format("{}: not complete after {:.1f} s (a peer rank is stuck, gone, or in a different "
                                  "collective); the NCCL communicator was aborted: destroy it",
                                  describe(op), seconds(now - start)));
    backoff.pause();
  }
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
                             dtrain_op_t op, void* stream) {
  const Op info{"allreduce", count, dtype, op_name(op)};
  const ncclDataType_t type = to_nccl(dtype);
  const ncclRedOp_t red = to_nccl(op);
  const std::size_t bytes = count * dtype_size(dtype);
  check_buffer(send, "sendbuf", bytes);
  if (recv != send) check_buffer(recv, "recvbuf", bytes);
  run(info, stream, [&](cudaStream_t s) { return ncclAllReduce(send, recv, count, type, red, comm_, s); });
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
                                  dtrain_op_t op, void* stream) {
  const Op info{"reduce_scatter", recvcount, dtype, op_name(op)};
  const ncclDataType_t type = to_nccl(dtype);
  const ncclRedOp_t red = to_nccl(op);
  const std::size_t bytes = recvcount * dtype_size(dtype);
  check_buffer(send, "sendbuf", bytes * static_cast<std::size_t>(size_));
  const auto* slot = static_cast<const char*>(send) + bytes * static_cast<std::size_t>(rank_);
  const bool in_place = send == recv && rank_ != 0 && bytes != 0;
  if (!in_place && recv != slot) check_buffer(recv, "recvbuf", bytes);
  void* target = in_place ? const_cast<char*>(slot) : recv;
  run(
      info, stream, [&](cudaStream_t s) { return ncclReduceScatter(send, target, recvcount, type, red, comm_, s); },
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
