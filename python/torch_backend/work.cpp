#include "work.hpp"

#include <c10/util/Exception.h>

namespace dtrain_torch {

DtrainWork::DtrainWork(int rank, c10d::OpType type, const char* name, std::vector<at::Tensor> outputs,
                       std::chrono::milliseconds timeout, Body body)
    : c10d::Work(rank, type),
      name_(name),
      outputs_(std::move(outputs)),
      timeout_(timeout),
      body_(std::move(body)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

int DtrainWork::sourceRank() const {
  TORCH_CHECK(source_rank_ >= 0, "dtrain backend: sourceRank() is known for a completed recv from any source only");
  return source_rank_;
}

void DtrainWork::execute(const Body& before) {
  std::exception_ptr error;
  try {
    if (before) before(*this);
    body_(*this);
  } catch (...) {
    error = std::current_exception();
  }
  body_ = nullptr;  // drops the tensors the body captured
  complete(error);
}

void DtrainWork::execute_pair(DtrainWork& first, DtrainWork& second, const Body& before, const Pair& pair) {
  std::exception_ptr error;
  try {
    if (before) before(first);
    if (first.p2p_->send) {
      pair(first, second);
    } else {
      pair(second, first);
    }
  } catch (...) {
    error = std::current_exception();
  }
  first.body_ = nullptr;
  second.body_ = nullptr;
  first.complete(error);
  second.complete(error);
}

void DtrainWork::cancel(std::exception_ptr error) {
  body_ = nullptr;
  complete(error);
}

// The work first, then the future: whoever the future's callbacks wake finds the work completed.
void DtrainWork::complete(std::exception_ptr error) {
  finish(error);
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

}  // namespace dtrain_torch
