// The Comm seam of the build with NCCL: the communicator of nccl_core, created on the first device
// call (nccl_of, handle.cpp). Errors travel as exceptions; the C ABI's guard() turns them into statuses.
#include "nccl_backend.hpp"

#include "nccl_core.hpp"

namespace dtrain::coll::nccl {

std::unique_ptr<Comm> create(const Options& options) { return std::make_unique<Communicator>(options); }

}  // namespace dtrain::coll::nccl
