// The NCCL backend's errors, devices and type mapping (see nccl_core.hpp).
#include "nccl_core.hpp"

#include "driver_probe.hpp"
#include "dtrain/common/params.hpp"

namespace dtrain::coll::nccl {
namespace {

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

}  // namespace

// ---- errors ----

std::string nccl_text(ncclResult_t result, ncclComm_t comm) {
  std::string text = ncclGetErrorString(result);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && *last != '\0') text += fmt::format(": {}", last);
  return text;
}

std::string cuda_text(cudaError_t error) {
  return fmt::format("{} ({})", cudaGetErrorName(error), cudaGetErrorString(error));
}

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
    case DTRAIN_BOOL: return ncclUint8;  // reduced through to_nccl(dtype, op)'s mapping
    case DTRAIN_INT16:
      throw Error(DTRAIN_ERR_UNSUPPORTED,
                  "int16 device buffers: NCCL has no 16-bit integer type; pass host buffers (the CPU engine takes "
                  "int16) or convert to int32 on the device");
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
    case DTRAIN_BAND:
    case DTRAIN_BOR:
    case DTRAIN_BXOR:
      throw Error(DTRAIN_ERR_UNSUPPORTED,
                  fmt::format("{} on device buffers: NCCL has no bitwise reductions; pass host buffers", op_name(op)));
    case DTRAIN_PREMUL_SUM: break;
  }
  throw Error(DTRAIN_ERR_INVALID_ARGUMENT,
              fmt::format("op {} is not a reduction NCCL takes here (DTRAIN_SUM .. DTRAIN_AVG, or a premultiplied sum "
                          "from dtrain_redop_create_premul_sum)",
                          static_cast<int>(op)));
}

ncclRedOp_t to_nccl(dtrain_dtype_t dtype, dtrain_op_t op) {
  if (dtype != DTRAIN_BOOL) return to_nccl(op);
  switch (op) {  // bool as uint8 0/1: or is max, and is min
    case DTRAIN_SUM:
    case DTRAIN_MAX:
    case DTRAIN_BOR: return ncclMax;
    case DTRAIN_PROD:
    case DTRAIN_MIN:
    case DTRAIN_BAND: return ncclMin;
    case DTRAIN_BXOR:
      throw Error(DTRAIN_ERR_UNSUPPORTED, "bxor of bool on device buffers: NCCL has no xor; pass host buffers");
    case DTRAIN_AVG:
      throw Error(DTRAIN_ERR_INVALID_ARGUMENT, "avg of bool is not defined; use sum or bor (or), prod or band (and)");
    case DTRAIN_PREMUL_SUM: break;
  }
  return to_nccl(op);  // throws
}

std::size_t dtype_size(dtrain_dtype_t dtype) {
  switch (dtype) {
    case DTRAIN_INT8: case DTRAIN_UINT8: case DTRAIN_BOOL: return 1;
    case DTRAIN_INT16: case DTRAIN_FLOAT16: case DTRAIN_BFLOAT16: return 2;
    case DTRAIN_INT32: case DTRAIN_FLOAT32: return 4;
    case DTRAIN_INT64: case DTRAIN_FLOAT64: return 8;
  }
  to_nccl(dtype);  // throws the invalid-dtype error
  return 0;
}

}  // namespace dtrain::coll::nccl
