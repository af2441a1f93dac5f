// The collectives library built without NCCL (DTRAIN_WITH_NCCL=OFF, or CUDA/NCCL not found):
// no buffer is treated as device memory, and asking for the NCCL backend says how to get it.
#include "nccl_backend.hpp"

#include "dtrain/common/errors.hpp"

namespace dtrain::coll::nccl {

bool built_with_nccl() { return false; }

bool is_device_pointer(const void*) { return false; }

std::unique_ptr<Comm> create(const Options&) {
  throw ConfigError(
      "device buffers need the NCCL backend, but this libdtrain_collectives was built without NCCL; "
      "rebuild with the CUDA toolkit and NCCL installed (-DDTRAIN_WITH_NCCL=ON)");
}

}  // namespace dtrain::coll::nccl
