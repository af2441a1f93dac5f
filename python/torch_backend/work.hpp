// One queued operation of a process group: torch's Work (wait, isCompleted, exception) plus the
// Future DDP's communication hooks chain on, completed with the op's output tensors.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "torch_includes.hpp"

namespace dtrain_torch {

class DtrainWork : public c10d::Work {
 public:
  using Body = std::function<void(DtrainWork&)>;
  // A send or a receive, which the group's thread may run together with the op queued next to it.
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

  const char* name() const { return name_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_source_rank(int r) { source_rank_ = r; }

  // Runs before(*this) and the body, and completes the work and its future, with the exception
  // either threw.
  void execute(const Body& before);
  // Completes it with an error without running it (the group went away first).
  void cancel(std::exception_ptr error);

  void set_p2p(PointToPoint p) { p2p_ = std::move(p); }
  const std::optional<PointToPoint>& p2p() const { return p2p_; }
  // Whether this send (receive) and `next` (a receive, a send) can run as one dtrain_sendrecv.
  bool pairs_with(const DtrainWork& next) const { return p2p_ && next.p2p_ && p2p_->send != next.p2p_->send; }
  // Runs before(first) and pair(send, recv) once, then completes both with its outcome.
  static void execute_pair(DtrainWork& first, DtrainWork& second, const Body& before, const Pair& pair);

 private:
  void complete(std::exception_ptr error);

  const char* name_;
  std::vector<at::Tensor> outputs_;
  std::chrono::milliseconds timeout_;
  Body body_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  int source_rank_ = -1;
  std::optional<PointToPoint> p2p_;
};

}  // namespace dtrain_torch
