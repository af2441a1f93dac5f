// ProcessGroupDtrain's lifecycle: shutdown and abort (destroy_process_group, _abort_process_group, the
// interpreter's exit), coalescing into batches, the device communicator made eagerly, and split.
#include <algorithm>

#include "process_group.hpp"

namespace dtrain_torch {

namespace {

// The live groups, for shutdown_all(); expired entries are dropped as new groups come.
std::mutex live_mutex;
std::vector<c10::weak_intrusive_ptr<ProcessGroupDtrain>> live;

}  // namespace

void ProcessGroupDtrain::track(const c10::intrusive_ptr<ProcessGroupDtrain>& group) {
  std::lock_guard<std::mutex> lock(live_mutex);
  live.erase(std::remove_if(live.begin(), live.end(), [](const auto& w) { return w.expired(); }), live.end());
  live.emplace_back(group);
}

void ProcessGroupDtrain::shutdown_all() {
  std::vector<c10::intrusive_ptr<ProcessGroupDtrain>> groups;
  {
    std::lock_guard<std::mutex> lock(live_mutex);
    for (auto& w : live) {
      if (auto g = w.lock()) groups.push_back(std::move(g));
    }
    live.clear();
  }
  for (auto& g : groups) g->shutdown_group();
}

void ProcessGroupDtrain::shutdown_group() {
  queue_->drain("was shut down (destroy_process_group, or the interpreter is exiting)");
  release_comm();
}

void ProcessGroupDtrain::abort_group(const std::string& why) {
  queue_->abort(why);
  release_comm();
}

// After the group's threads are joined (by whichever of shutdown and abort came first).
void ProcessGroupDtrain::release_comm() {
  std::lock_guard<std::mutex> lock(comm_mutex_);
  dtrain_comm_destroy(comm_);
  comm_ = nullptr;
}

void ProcessGroupDtrain::interrupt(const std::string& why) {
  std::lock_guard<std::mutex> lock(comm_mutex_);
  if (comm_ != nullptr) dtrain_comm_abort(comm_, why.c_str());
}

#if DTRAIN_TORCH_TENSOR_COALESCED || !DTRAIN_TORCH_BACKEND
void ProcessGroupDtrain::startCoalescing() {
  std::lock_guard<std::mutex> lock(batch_mutex_);
  TORCH_CHECK(!coalescing_, "dtrain backend: startCoalescing while a batch is already open on group '", name_, "'");
  coalescing_ = true;
  batch_.clear();
}
#endif

#if DTRAIN_TORCH_TENSOR_COALESCED
c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::endCoalescing() {
  std::vector<c10::intrusive_ptr<DtrainWork>> members;
  {
    std::lock_guard<std::mutex> lock(batch_mutex_);
    TORCH_CHECK(coalescing_, "dtrain backend: endCoalescing without startCoalescing on group '", name_, "'");
    coalescing_ = false;
    members.swap(batch_);
  }
  std::vector<at::Tensor> outputs;
  for (const auto& m : members) {
    for (const auto& t : m->result()) outputs.push_back(t);
  }
  auto batch = c10::make_intrusive<DtrainWork>(rank_, c10d::OpType::COALESCED, "coalesced batch", std::move(outputs),
                                               c10d::kUnsetTimeout, nullptr);
  batch->set_members(std::move(members));
  queue_->push(batch);
  return batch;
}
#elif !DTRAIN_TORCH_BACKEND
void ProcessGroupDtrain::endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& /*reqs*/) {
  std::vector<c10::intrusive_ptr<DtrainWork>> members;
  {
    std::lock_guard<std::mutex> lock(batch_mutex_);
    TORCH_CHECK(coalescing_, "dtrain backend: endCoalescing without startCoalescing on group '", name_, "'");
    coalescing_ = false;
    members.swap(batch_);
  }
  // torch 1.13 keeps the members' works itself (batch_isend_irecv returns them)
  auto batch = c10::make_intrusive<DtrainWork>(rank_, c10d::OpType::UNKNOWN, "coalesced batch",
                                               std::vector<at::Tensor>(), c10d::kUnsetTimeout, nullptr);
  batch->set_members(std::move(members));
  queue_->push(batch);
}
#endif

#if DTRAIN_TORCH_EAGER_CONNECT
// The CPU communicator is made with the group; a CUDA device's NCCL communicator on its first op,
// which a one-element all_reduce here is (every rank of the group makes it, as the call is collective).
void ProcessGroupDtrain::eagerConnectSingleDevice(at::Device device) {
  if (!device.is_cuda()) return;
  std::vector<at::Tensor> one{at::zeros({1}, at::TensorOptions().device(device).dtype(at::kFloat))};
  allreduce(one, c10d::AllreduceOptions())->wait();
}
#endif

#if DTRAIN_TORCH_BACKEND_SPLIT
c10::intrusive_ptr<c10d::Backend::Options> ProcessGroupDtrain::getBackendOptions() {
  auto opts = c10::make_intrusive<c10d::Backend::Options>("dtrain", timeout_);
  opts->group_name = torch_name_;
  opts->global_ranks_in_group = global_ranks_;
  return opts;
}

// A new group of `ranks` (ranks of this group) over `store`, which torch gives every member alike;
// ranks not in it get none. torch asks once per device the group is registered for: the second ask
// with the same store and ranks gets the same child.
c10::intrusive_ptr<c10d::Backend> ProcessGroupDtrain::split(const c10::intrusive_ptr<c10d::Store>& store,
                                                            const std::vector<int>& ranks,
                                                            const c10::intrusive_ptr<c10d::Backend::Options>& opts) {
  std::vector<int> sorted(ranks);
  std::sort(sorted.begin(), sorted.end());
  if (store.get() == split_store_ && sorted == split_ranks_) {
    if (auto child = split_child_.lock()) return child;
  }
  const auto me = std::find(sorted.begin(), sorted.end(), rank_);
  if (me == sorted.end()) return nullptr;
  GroupSpec spec;
  spec.store = store;
  spec.rank = static_cast<int>(me - sorted.begin());
  spec.size = static_cast<int>(sorted.size());
  spec.timeout = opts ? opts->timeout : timeout_;
  spec.torch_name = opts ? opts->group_name : "";
  std::string shown;
  for (size_t i = 0; i < sorted.size(); ++i) {
    const auto r = static_cast<size_t>(sorted[i]);
    spec.global_ranks.push_back(r < global_ranks_.size() ? global_ranks_[r] : r);
    if (i < 8) shown += (i ? "," : "") + std::to_string(spec.global_ranks.back());
  }
  spec.name = "split of '" + name_ + "' (ranks " + shown + (sorted.size() > 8 ? ",...)" : ")");
  auto child = c10::make_intrusive<ProcessGroupDtrain>(std::move(spec));
  track(child);
  split_store_ = store.get();
  split_ranks_ = sorted;
  split_child_ = c10::weak_intrusive_ptr<c10d::Backend>(c10::intrusive_ptr<c10d::Backend>(child));
  return child;
}
#endif

}  // namespace dtrain_torch
