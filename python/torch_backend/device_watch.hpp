// The thread that completes a group's device ops: the group's thread hands over each op once its
// work is queued on the device; this one completes the op (its Work, then its future) when the device
// has done it, in issue order, and fails it when the op's deadline passes first (a peer stuck or
// gone). Started on the first device op, so CPU-only groups never have it.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "work.hpp"

namespace dtrain_torch {

class DeviceWatch {
 public:
  // `deadline_of` gives an op's deadline in seconds (its own timeout or the group's).
  explicit DeviceWatch(std::function<double(const DtrainWork&)> deadline_of);
  ~DeviceWatch();
  DeviceWatch(const DeviceWatch&) = delete;
  DeviceWatch& operator=(const DeviceWatch&) = delete;

  void add(c10::intrusive_ptr<DtrainWork> work);
  // From now on the ops handed over and not done fail at once with `why` (any thread; no join).
  void abort(const std::string& why);
  // Waits for the ops handed over to finish on the device (each bounded by its deadline, unless
  // aborted); joins the thread (one caller).
  void stop();

 private:
  void loop();
  // Polls until the device has done `work` (true) or its deadline passed or the watch was aborted.
  bool wait_done(DtrainWork& work);

  std::function<double(const DtrainWork&)> deadline_of_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<c10::intrusive_ptr<DtrainWork>> pending_;
  bool stopping_ = false;
  bool aborting_ = false;
  std::string why_;
  std::thread thread_;
};

}  // namespace dtrain_torch
