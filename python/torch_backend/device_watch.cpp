#include "device_watch.hpp"

#include <algorithm>
#include <stdexcept>

#include "gil.hpp"

namespace dtrain_torch {

DeviceWatch::DeviceWatch(std::function<double(const DtrainWork&)> deadline_of)
    : deadline_of_(std::move(deadline_of)) {}

DeviceWatch::~DeviceWatch() {
  abort("the process group was destroyed");
  stop();
}

void DeviceWatch::add(c10::intrusive_ptr<DtrainWork> work) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });  // (the group's thread adds, before stop())
    pending_.push_back(std::move(work));
  }
  cv_.notify_one();
}

void DeviceWatch::abort(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    if (!aborting_) why_ = why;
    aborting_ = true;
  }
  cv_.notify_all();
}

void DeviceWatch::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  join_without_gil(thread_);
}

bool DeviceWatch::wait_done(DtrainWork& work) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(deadline_of_(work)));
  auto pause = std::chrono::microseconds(20);
  while (!work.device_done()) {
    if (Clock::now() >= deadline) return false;
    std::unique_lock<std::mutex> lock(mutex_);
    if (cv_.wait_for(lock, pause, [this] { return aborting_; })) return false;
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
  return true;
}

void DeviceWatch::loop() {
  for (;;) {
    c10::intrusive_ptr<DtrainWork> work;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return stopping_ || !pending_.empty(); });
      if (pending_.empty()) return;
      work = pending_.front();
    }
    std::exception_ptr error;
    if (!wait_done(*work)) {
      std::lock_guard<std::mutex> lock(mutex_);
      const std::string what = aborting_ ? why_
                                         : "its device work did not finish within " +
                                               std::to_string(deadline_of_(*work)) +
                                               " s (a peer is stuck or gone, or called another collective)";
      error = std::make_exception_ptr(std::runtime_error(std::string("dtrain backend: ") + work->name() + ": " + what));
    }
    work->complete(error);
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.pop_front();
  }
}

}  // namespace dtrain_torch
