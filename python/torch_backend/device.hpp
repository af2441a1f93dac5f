// Ops on CUDA tensors, with ProcessGroupNCCL's stream semantics, behind a seam the rest of the
// backend compiles without CUDA: cuda_device.cpp implements it where torch has CUDA, no_device.cpp
// elsewhere (cmake/DtrainTorch.cmake picks one).
//
// An op's device side (DeviceSync) is made on the caller's thread when the op is issued: it marks the
// caller's current stream there, so the op starts after the work already queued on it. On the
// group's thread the op then runs on the group's own stream for that device (waiting for the mark;
// staging copies run there too), and its end is marked on that stream. Tensors are recorded on that
// stream (the caching allocator keeps their memory until the stream's work so far is done).
// Work::wait() makes the caller's current stream wait for the end mark; the Work and its future
// complete once the device has passed it (DeviceWatch).
#pragma once

#include <memory>
#include <vector>

#include "torch_includes.hpp"

namespace dtrain_torch {

class DeviceSync {
 public:
  virtual ~DeviceSync() = default;
  // On the group's thread, before the op's body: the group's stream becomes the thread's current
  // stream (and the device current), waits for the issue-time mark and holds `tensors`' memory.
  // Returns the stream for the C ABI (a cudaStream_t).
  virtual void* begin(const std::vector<at::Tensor>& tensors) = 0;
  // After the body (also when it threw): marks the op's end on the stream and restores the thread's
  // stream and device.
  virtual void end() = 0;
  // Whether the device has passed the op's end (never blocks).
  virtual bool done() = 0;
  // The caller's current stream (of the op's device) waits for the op's end; the host does not.
  virtual void block_current_stream() = 0;
};

// A group's device side: its streams, one per device, taken from torch's pool on first use.
class DeviceContext {
 public:
  virtual ~DeviceContext() = default;
  // On the caller's thread: the device side of an op on tensors of `device` (a CUDA device).
  virtual std::unique_ptr<DeviceSync> issue(const at::Device& device) = 0;
};

// The context of a new group; its issue() refuses every device where the backend was built for a
// torch without CUDA.
std::unique_ptr<DeviceContext> make_device_context();
// Whether this build runs ops on CUDA tensors.
bool built_with_cuda();

}  // namespace dtrain_torch
