// The device seam (device.hpp) where torch has no CUDA: no tensor can be on a CUDA device, and any
// other device is refused before an op is queued (tensor_args.cpp); issue() says so if reached.
#include <c10/util/Exception.h>

#include "device.hpp"

namespace dtrain_torch {

namespace {

class NoDevices final : public DeviceContext {
 public:
  std::unique_ptr<DeviceSync> issue(const at::Device& device) override {
    TORCH_CHECK(false, "dtrain backend: a tensor on ", device,
                ": this build of the backend runs CPU tensors only (it was built against a torch without CUDA)");
  }
};

}  // namespace

std::unique_ptr<DeviceContext> make_device_context() { return std::make_unique<NoDevices>(); }

bool built_with_cuda() { return false; }

}  // namespace dtrain_torch
