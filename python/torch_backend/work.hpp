// One queued operation of a process group: torch's Work (wait, isCompleted, exception) plus the
// Future DDP's communication hooks chain on, completed with the op's output tensors. An op on CUDA
// tensors carries its device side (device.hpp): wait() then makes the caller's stream wait instead of
// the host, and the work completes when the device has done it. A batch (torch's coalescing) is a
// work whose members run together.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "device.hpp"
#include "torch_includes.hpp"

namespace dtrain_torch {

class DtrainWork : public c10d::Work {
 public:
  using Body = std::function<void(DtrainWork&)>;
  // A send or a receive, which the group's thread may run together with another (a pair).
  struct PointToPoint {
    bool send = false;
    at::Tensor tensor;
    int peer = -1;
    int tag = 0;
  };
  using Pair = std::function<void(DtrainWork& send, DtrainWork& recv)>;
  // `outputs` are what the future completes with; `timeout` is the op's deadline (kUnsetTimeout:
  // the group's); `body` runs on the group's thread.
  DtrainWork(int rank, c10d::OpType type, const char* name, std::vector<at::Tensor> outputs,
             std::chrono::milliseconds timeout, Body body);

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  std::vector<at::Tensor> result() override { return outputs_; }
  int sourceRank() const override;
  // CPU ops: until the op is done. Device ops: until the group's thread has queued it on the device
  // (or it failed), then the caller's current stream waits for it.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void synchronize() override;

  const char* name() const { return name_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_source_rank(int r) { source_rank_ = r; }

  // The device side of an op on device tensors (`tensors`: every tensor it reads or writes).
  void set_device(std::unique_ptr<DeviceSync> device, std::vector<at::Tensor> tensors);
  // Whether it (or a member of the batch) is an op on device tensors.
  bool on_device() const;
  // The stream the body passes to the C ABI: null for host tensors.
  void* stream() const { return stream_; }
  // Whether the device has done this op (a batch: its members have completed); never blocks.
  bool device_done();

  // Runs before(*this) and the body. A host op then completes (with the exception either threw); a
  // device op only when the exception came, else once DeviceWatch sees its device work done.
  void execute(const Body& before);
  // Completes it with an error, or without one (a device op whose device work is done; a batch whose
  // members have completed: with the first member's error).
  void complete(std::exception_ptr error);

  void set_p2p(PointToPoint p) { p2p_ = std::move(p); }
  const std::optional<PointToPoint>& p2p() const { return p2p_; }
  // Whether this send (receive) and `other` (a receive, a send, on the same device) can run as one
  // dtrain_sendrecv.
  bool pairs_with(const DtrainWork& other) const {
    return p2p_ && other.p2p_ && p2p_->send != other.p2p_->send &&
           p2p_->tensor.device() == other.p2p_->tensor.device();
  }
  // Runs before(first) and pair(send, recv) once, then both as execute() would.
  static void execute_pair(DtrainWork& first, DtrainWork& second, const Body& before, const Pair& pair);

  // A batch: the works issued between startCoalescing and endCoalescing, run in one go (batch.cpp).
  void set_members(std::vector<c10::intrusive_ptr<DtrainWork>> members) { members_ = std::move(members); }
  std::vector<c10::intrusive_ptr<DtrainWork>>& members() { return members_; }

 private:
  // Before the body: the device side's begin (the stream); after it: its end.
  void begin_device();
  void end_device();
  // After the body: completes a host op (or one that failed); marks a device op queued.
  void settle(std::exception_ptr error);
  void mark_queued();
  // The caller's current streams wait for this op's (its members') device work.
  void block_streams();

  const char* name_;
  std::vector<at::Tensor> outputs_;
  std::chrono::milliseconds timeout_;
  Body body_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  int source_rank_ = -1;
  std::optional<PointToPoint> p2p_;
  std::vector<c10::intrusive_ptr<DtrainWork>> members_;
  std::unique_ptr<DeviceSync> device_;
  std::vector<at::Tensor> device_tensors_;
  void* stream_ = nullptr;
  bool queued_ = false;  // a device op's work is on the device (under Work::mutex_)
};

}  // namespace dtrain_torch
