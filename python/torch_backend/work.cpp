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

void DtrainWork::set_device(std::unique_ptr<DeviceSync> device, std::vector<at::Tensor> tensors) {
  device_ = std::move(device);
  device_tensors_ = std::move(tensors);
}

bool DtrainWork::on_device() const {
  if (device_) return true;
  for (const auto& m : members_) {
    if (m->on_device()) return true;
  }
  return false;
}

bool DtrainWork::device_done() {
  if (device_) return device_->done();
  for (const auto& m : members_) {
    if (!m->isCompleted()) return false;
  }
  return true;
}

bool DtrainWork::wait(std::chrono::milliseconds timeout) {
  if (!on_device()) return c10d::Work::wait(timeout);
  {
    std::unique_lock<std::mutex> lock(mutex_);
    const auto ready = [this] { return queued_ || completed_; };
    if (timeout == kNoTimeout) {
      cv_.wait(lock, ready);
    } else if (!cv_.wait_for(lock, timeout, ready)) {
      TORCH_CHECK(false, "dtrain backend: ", name_, " was not queued on the device within ", timeout.count(), " ms");
    }
    if (exception_) std::rethrow_exception(exception_);
  }
  block_streams();
  return true;
}

void DtrainWork::synchronize() {
  if (on_device()) wait(kNoTimeout);
}

void DtrainWork::block_streams() {
  if (device_) device_->block_current_stream();
  for (const auto& m : members_) m->block_streams();
}

void DtrainWork::begin_device() {
  if (device_) stream_ = device_->begin(device_tensors_);
}

void DtrainWork::end_device() {
  if (!device_) return;
  device_->end();
  device_tensors_.clear();  // recorded on the group's stream: the allocator keeps them until it passes
  stream_ = nullptr;
}

void DtrainWork::settle(std::exception_ptr error) {
  body_ = nullptr;  // drops the tensors the body captured
  if (error || !on_device()) {
    complete(error);
  } else {
    mark_queued();
  }
}

void DtrainWork::mark_queued() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queued_ = true;
  }
  cv_.notify_all();
}

void DtrainWork::execute(const Body& before) {
  std::exception_ptr error;
  try {
    if (before) before(*this);
    begin_device();
    if (body_) body_(*this);
  } catch (...) {
    error = std::current_exception();
  }
  end_device();
  settle(error);
}

void DtrainWork::execute_pair(DtrainWork& first, DtrainWork& second, const Body& before, const Pair& pair) {
  std::exception_ptr error;
  try {
    if (before) before(first);
    first.begin_device();
    second.begin_device();
    if (first.p2p_->send) {
      pair(first, second);
    } else {
      pair(second, first);
    }
  } catch (...) {
    error = std::current_exception();
  }
  for (DtrainWork* w : {&second, &first}) {
    w->end_device();
    w->settle(error);
  }
}

// The work first, then the future: whoever the future's callbacks wake finds the work completed.
void DtrainWork::complete(std::exception_ptr error) {
  body_ = nullptr;
  for (const auto& m : members_) {
    if (!error) error = m->exception();
  }
  finish(error);
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

}  // namespace dtrain_torch
