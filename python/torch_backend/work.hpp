// One queued operation of a process group: torch's Work (wait, isCompleted, exception) plus the
// Future DDP's communication hooks chain on, completed with the op's output tensors.
#pragma once

#include <functional>
#include <vector>

#include "torch_includes.hpp"

namespace dtrain_torch {

class DtrainWork : public c10d::Work {
 public:
  using Body = std::function<void(DtrainWork&)>;
  // `outputs` are what the future completes with; `timeout` is the op's deadline (kUnsetTimeout:
  // the group's); `body` runs on the group's thread.
  DtrainWork(int rank, c10d::OpType type, const char* name, std::vector<at::Tensor> outputs,
             std::chrono::milliseconds timeout, Body body);

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  std::vector<at::Tensor> result() override { return outputs_; }
  int sourceRank() const override;

  const char* name() const { return name_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_source_rank(int r) { source_rank_ = r; }

  // Runs before(*this) and the body, and completes the work and its future, with the exception
  // either threw.
  void execute(const Body& before);
  // Completes it with an error without running it (the group went away first).
  void cancel(std::exception_ptr error);

 private:
  void complete(std::exception_ptr error);

  const char* name_;
  std::vector<at::Tensor> outputs_;
  std::chrono::milliseconds timeout_;
  Body body_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  int source_rank_ = -1;
};

}  // namespace dtrain_torch
