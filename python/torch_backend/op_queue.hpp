// The thread of one process group: its ops run there one at a time in the order they were issued
// (every rank issues a group's collectives in one order, so they match), while the caller goes on.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "work.hpp"

namespace dtrain_torch {

class OpQueue {
 public:
  // `before` runs before each op on the thread (it sets the op's deadline); `pair` runs a send and
  // a receive queued one right after the other together (so two ranks that each post a send and then
  // a receive to the other never wait for each other's receive).
  OpQueue(DtrainWork::Body before, DtrainWork::Pair pair);
  ~OpQueue();
  OpQueue(const OpQueue&) = delete;
  OpQueue& operator=(const OpQueue&) = delete;

  void push(c10::intrusive_ptr<DtrainWork> work);
  // Holds the ops pushed from now on back from the thread until release(): torch's coalescing
  // (batch_isend_irecv), so a batch's sends and receives are all queued before any runs and pair up.
  void hold();
  void release();
  // Lets the running op finish, fails the ops not started yet with `why`, joins the thread.
  void stop(const std::string& why);

 private:
  void loop();
  void join_without_gil();

  DtrainWork::Body before_;
  DtrainWork::Pair pair_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<c10::intrusive_ptr<DtrainWork>> queue_;
  bool stopping_ = false;
  bool held_ = false;
  std::thread thread_;
};

}  // namespace dtrain_torch
