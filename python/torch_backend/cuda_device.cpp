// The device seam (device.hpp) for CUDA tensors, built only where torch has CUDA (c10_cuda): events
// and streams through c10 (c10::Event, c10::cuda streams), so nothing here calls the CUDA runtime
// itself; the library's NCCL path gets the group's stream as its cudaStream_t.
#include <c10/core/Event.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <map>
#include <optional>

#include "device.hpp"

namespace dtrain_torch {

namespace {

class CudaContext;

class CudaSync final : public DeviceSync {
 public:
  CudaSync(CudaContext& context, const at::Device& device)
      : context_(context),
        device_(device),
        ready_(c10::DeviceType::CUDA),
        end_(c10::DeviceType::CUDA) {
    ready_.record(c10::cuda::getCurrentCUDAStream(device.index()));
  }

  void* begin(const std::vector<at::Tensor>& tensors) override;

  void end() override {
    if (!guard_) return;
    end_.record(guard_->current_stream());
    guard_.reset();
  }

  bool done() override { return end_.was_marked_for_recording() && end_.query(); }

  void block_current_stream() override { end_.block(c10::cuda::getCurrentCUDAStream(device_.index())); }

 private:
  CudaContext& context_;
  at::Device device_;
  c10::Event ready_;
  c10::Event end_;
  std::optional<c10::cuda::CUDAStreamGuard> guard_;
};

class CudaContext final : public DeviceContext {
 public:
  std::unique_ptr<DeviceSync> issue(const at::Device& device) override {
    TORCH_CHECK(device.is_cuda(), "dtrain backend: a tensor on ", device,
                "; the backend runs CPU and CUDA tensors only (move it with .cpu() or .cuda())");
    return std::make_unique<CudaSync>(*this, device);
  }

  // The group's stream for `device` (group's thread only): high priority, as ProcessGroupNCCL's.
  c10::cuda::CUDAStream stream(const at::Device& device) {
    auto it = streams_.find(device.index());
    if (it == streams_.end())
      it = streams_.emplace(device.index(), c10::cuda::getStreamFromPool(/*isHighPriority=*/true, device.index())).first;
    return it->second;
  }

 private:
  std::map<c10::DeviceIndex, c10::cuda::CUDAStream> streams_;
};

void* CudaSync::begin(const std::vector<at::Tensor>& tensors) {
  const c10::cuda::CUDAStream stream = context_.stream(device_);
  guard_.emplace(stream);  // the device and its current stream, for the body's kernels too
  ready_.block(stream);
  for (const auto& t : tensors) {
    if (t.defined() && t.is_cuda()) c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), stream);
  }
  return stream.stream();
}

}  // namespace

std::unique_ptr<DeviceContext> make_device_context() { return std::make_unique<CudaContext>(); }

bool built_with_cuda() { return true; }

}  // namespace dtrain_torch
