#include "op_queue.hpp"

#include <Python.h>

#include <stdexcept>

namespace dtrain_torch {

OpQueue::OpQueue(DtrainWork::Body before, DtrainWork::Pair pair) : before_(std::move(before)), pair_(std::move(pair)) {
  thread_ = std::thread([this] { loop(); });
}

OpQueue::~OpQueue() { stop("the process group was destroyed"); }

void OpQueue::push(c10::intrusive_ptr<DtrainWork> work) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    TORCH_CHECK(!stopping_, "dtrain backend: ", work->name(), " on a process group that is being destroyed");
    queue_.push_back(std::move(work));
  }
  cv_.notify_one();
}

void OpQueue::hold() {
  std::lock_guard<std::mutex> lock(mutex_);
  held_ = true;
}

void OpQueue::release() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    held_ = false;
  }
  cv_.notify_one();
}

void OpQueue::stop(const std::string& why) {
  std::deque<c10::intrusive_ptr<DtrainWork>> left;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    left.swap(queue_);
  }
  cv_.notify_one();
  for (auto& w : left) {
    w->cancel(std::make_exception_ptr(
        std::runtime_error(std::string("dtrain backend: ") + w->name() + " was not run: " + why)));
  }
  if (thread_.joinable()) join_without_gil();
}

// The thread may need the GIL to finish its op (freeing a tensor that has a Python object), and a
// group is often destroyed from Python (destroy_process_group, or DDP's reducer at exit) with the GIL
// held: joining then would wait for ever. So the GIL is let go for the join.
void OpQueue::join_without_gil() {
  if (Py_IsInitialized() == 0 || PyGILState_Check() == 0) {
    thread_.join();
    return;
  }
  PyThreadState* saved = PyEval_SaveThread();
  thread_.join();
  PyEval_RestoreThread(saved);
}

void OpQueue::loop() {
  // Grad mode is per thread: the ops write into tensors (parameters too) outside autograd here.
  c10::AutoGradMode no_grad(false);
  for (;;) {
    c10::intrusive_ptr<DtrainWork> work, partner;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return stopping_ || (!held_ && !queue_.empty()); });
      if (queue_.empty()) return;
      work = std::move(queue_.front());
      queue_.pop_front();
      if (!queue_.empty() && work->pairs_with(*queue_.front())) {
        partner = std::move(queue_.front());
        queue_.pop_front();
      }
    }
    if (partner) {
      DtrainWork::execute_pair(*work, *partner, before_, pair_);
    } else {
      work->execute(before_);
    }
  }
}

}  // namespace dtrain_torch
