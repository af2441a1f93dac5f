// The collectives library built without NCCL (DTRAIN_WITH_NCCL=OFF, or CUDA/NCCL not found).
// Device buffers are still recognised, through the CUDA driver the process has loaded itself (a
// worker that allocated GPU memory has), so they get a clear "built without NCCL" error instead of
// being read as host memory by the CPU engine.
#include "driver_probe.hpp"
#include "nccl_backend.hpp"

#include <cstdint>

namespace dtrain::coll::nccl {
namespace {

// Driver API values (cuda.h), so that this file needs no CUDA headers.
constexpr int kAttrMemoryType = 2;     // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr int kAttrIsManaged = 8;      // CU_POINTER_ATTRIBUTE_IS_MANAGED
constexpr int kAttrDeviceOrdinal = 9;  // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
constexpr unsigned kMemoryTypeDevice = 2;  // CU_MEMORYTYPE_DEVICE
using PointerGetAttribute = int (*)(void* data, int attribute, unsigned long long ptr);

PointerGetAttribute pointer_get_attribute() noexcept {
  void* sym = cuda_driver_symbol("cuPointerGetAttribute");
  return reinterpret_cast<PointerGetAttribute>(sym);
}

unsigned long long address(const void* ptr) noexcept { return reinterpret_cast<std::uintptr_t>(ptr); }

}  // namespace

bool built_with_nccl() { return false; }

// Device memory that the host cannot read (managed memory is host-accessible, so it may stay with
// the CPU engine in this build).
bool is_device_pointer(const void* ptr) {
  if (ptr == nullptr || !cuda_driver_loaded()) return false;
  PointerGetAttribute get = pointer_get_attribute();
  if (get == nullptr) return false;
  unsigned type = 0;
  if (get(&type, kAttrMemoryType, address(ptr)) != 0 || type != kMemoryTypeDevice) return false;
  unsigned managed = 0;
  return get(&managed, kAttrIsManaged, address(ptr)) != 0 || managed == 0;
}

int device_of(const void* ptr) {
  if (!is_device_pointer(ptr)) return -1;
  int device = -1;
  PointerGetAttribute get = pointer_get_attribute();
  if (get == nullptr || get(&device, kAttrDeviceOrdinal, address(ptr)) != 0) return -1;
  return device;
}

std::unique_ptr<Comm> create(const Options&) {
  throw Error(DTRAIN_ERR_UNSUPPORTED,
              "device buffers need the NCCL backend, but this libdtrain_collectives was built without NCCL; "
              "rebuild with the CUDA toolkit and NCCL installed (-DDTRAIN_WITH_NCCL=ON), or pass host "
              "buffers");
}

}  // namespace dtrain::coll::nccl
