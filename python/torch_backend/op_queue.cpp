#include "op_queue.hpp"

#include <optional>
#include <stdexcept>
#include <vector>

#include "gil.hpp"

namespace dtrain_torch {

namespace {

std::exception_ptr not_run(const DtrainWork& w, const std::string& why) {
  return std::make_exception_ptr(
      std::runtime_error(std::string("dtrain backend: ") + w.name() + " was not run: " + why));
}

// The member of a batch that runs with member i, a send or a receive: the first later one of the
// other direction not run yet, with the same peer when there is one.
std::optional<size_t> partner(const std::vector<c10::intrusive_ptr<DtrainWork>>& ms, const std::vector<bool>& ran,
                              size_t i) {
  std::optional<size_t> any;
  for (size_t j = i + 1; j < ms.size(); ++j) {
    if (ran[j] || !ms[i]->pairs_with(*ms[j])) continue;
    if (ms[j]->p2p()->peer == ms[i]->p2p()->peer) return j;
    if (!any) any = j;
  }
  return any;
}

}  // namespace

OpQueue::OpQueue(Hooks hooks) : hooks_(std::move(hooks)), watch_(hooks_.deadline_s) {
  thread_ = std::thread([this] { loop(); });
}

OpQueue::~OpQueue() { drain("the process group was destroyed"); }

void OpQueue::push(c10::intrusive_ptr<DtrainWork> work) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    TORCH_CHECK(!stopping_, "dtrain backend: ", work->name(), " on a process group that ", why_);
    queue_.push_back(std::move(work));
  }
  cv_.notify_one();
}

void OpQueue::drain(const std::string& why) { stop(false, why); }

void OpQueue::abort(const std::string& why) { stop(true, why); }

void OpQueue::stop(bool abort, const std::string& why) {
  std::deque<c10::intrusive_ptr<DtrainWork>> left;
  bool interrupt = false;
  bool joiner = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!stopping_ || (abort && !aborted_)) why_ = abort ? "was aborted (" + why + ")" : why;
    stopping_ = true;
    if (abort && !aborted_) {
      aborted_ = true;
      left.swap(queue_);
      interrupt = running_;
    }
    joiner = !joining_;
    joining_ = true;
  }
  cv_.notify_one();
  for (auto& w : left) w->complete(not_run(*w, why));
  if (interrupt && hooks_.interrupt) hooks_.interrupt(why);
  if (abort) watch_.abort(why);
  if (!joiner) {
    wait_without_gil([this] {
      std::unique_lock<std::mutex> lock(mutex_);
      joined_cv_.wait(lock, [this] { return joined_; });
    });
    return;
  }
  join_without_gil(thread_);
  watch_.stop();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    joined_ = true;
  }
  joined_cv_.notify_all();
}

void OpQueue::loop() {
  // Grad mode is per thread: the ops write into tensors (parameters too) outside autograd here.
  c10::AutoGradMode no_grad(false);
  for (;;) {
    c10::intrusive_ptr<DtrainWork> work, partner;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      running_ = false;
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      work = std::move(queue_.front());
      queue_.pop_front();
      if (!queue_.empty() && work->pairs_with(*queue_.front())) {
        partner = std::move(queue_.front());
        queue_.pop_front();
      }
      running_ = true;
    }
    run(std::move(work), std::move(partner));
  }
}

void OpQueue::run(c10::intrusive_ptr<DtrainWork> work, c10::intrusive_ptr<DtrainWork> partner) {
  if (!work->members().empty()) {
    run_batch(*work);
  } else if (partner) {
    DtrainWork::execute_pair(*work, *partner, hooks_.before, hooks_.pair);
    settle(partner);
  } else {
    work->execute(hooks_.before);
  }
  settle(work);
}

void OpQueue::run_batch(DtrainWork& batch) {
  auto& ms = batch.members();
  std::vector<bool> ran(ms.size(), false);
  for (size_t i = 0; i < ms.size(); ++i) {
    if (ran[i]) continue;
    ran[i] = true;
    const std::optional<size_t> j = ms[i]->p2p() ? partner(ms, ran, i) : std::nullopt;
    if (j) {
      ran[*j] = true;
      DtrainWork::execute_pair(*ms[i], *ms[*j], hooks_.before, hooks_.pair);
      settle(ms[*j]);
    } else {
      ms[i]->execute(hooks_.before);
    }
    settle(ms[i]);
  }
  batch.execute(nullptr);  // its own body is empty: it completes from its members (work.cpp)
}

void OpQueue::settle(const c10::intrusive_ptr<DtrainWork>& work) {
  if (work->on_device() && !work->isCompleted()) watch_.add(work);
}

}  // namespace dtrain_torch
