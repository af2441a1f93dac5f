#pragma once
// Cheap questions about the CUDA driver that need no CUDA headers, shared by the NCCL backend and
// the build without NCCL.
namespace dtrain::coll::nccl {

// True once this process has loaded the CUDA driver library (libcuda.so*). Until then no device
// memory can exist in the process, so host-buffer routing never has to initialise CUDA. About 20 ns
// while nothing new has been loaded since the last call; once true, stays true.
bool cuda_driver_loaded() noexcept;

// The address of a driver API entry point (e.g. "cuPointerGetAttribute"), or nullptr when the
// driver is not loaded or lacks it. Never loads the driver itself.
void* cuda_driver_symbol(const char* name) noexcept;

}  // namespace dtrain::coll::nccl
