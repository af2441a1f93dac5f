// The thread of one process group: its ops run there one at a time in the order they were issued
// (every rank issues a group's collectives in one order, so they match), while the caller goes on.
// A batch (torch's coalescing) runs in one go: its sends and receives as pairs that progress together.
// Ops on device tensors are queued on the device here and completed by the group's DeviceWatch.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "device_watch.hpp"
#include "work.hpp"

namespace dtrain_torch {

class OpQueue {
 public:
  struct Hooks {
    DtrainWork::Body before;  // runs before each op on the thread (it sets the op's deadline)
    // Runs a send and a receive together (one dtrain_sendrecv), so two ranks that each post a send and
    // a receive to the other never wait for each other's receive.
    DtrainWork::Pair pair;
    // Makes the op running now fail at once with the reason (any thread; abort()).
    std::function<void(const std::string&)> interrupt;
    std::function<double(const DtrainWork&)> deadline_s;  // an op's deadline in seconds
  };
  explicit OpQueue(Hooks hooks);
  ~OpQueue();
  OpQueue(const OpQueue&) = delete;
  OpQueue& operator=(const OpQueue&) = delete;

  // Refuses (naming `why` of stop) once stopped.
  void push(c10::intrusive_ptr<DtrainWork> work);
  // Shutdown: no more ops; those already queued run (each bounded by its deadline), device ops
  // finish; then the threads are joined. `why` completes "... on a process group that " for a later
  // push ("was shut down").
  void drain(const std::string& why);
  // Abort: no more ops; the queued ones fail with `why`, the running one is interrupted and fails,
  // device ops not finished fail; the threads are joined. Never waits for a peer. Both may be
  // called from several threads at once (an abort while a shutdown drains interrupts its op).
  void abort(const std::string& why);

 private:
  void stop(bool abort, const std::string& why);
  void loop();
  void run(c10::intrusive_ptr<DtrainWork> work, c10::intrusive_ptr<DtrainWork> partner);
  void run_batch(DtrainWork& batch);
  // After an op ran: a device op whose work is on the device goes to the watch.
  void settle(const c10::intrusive_ptr<DtrainWork>& work);

  Hooks hooks_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<c10::intrusive_ptr<DtrainWork>> queue_;
  bool stopping_ = false;
  bool aborted_ = false;
  bool running_ = false;  // an op is being run (under mutex_)
  bool joining_ = false;  // one stop() joins the threads; the others wait for joined_
  bool joined_ = false;
  std::condition_variable joined_cv_;
  std::string why_;
  DeviceWatch watch_;
  std::thread thread_;
};

}  // namespace dtrain_torch
