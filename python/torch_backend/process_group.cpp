#include "process_group.hpp"

#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include "gil.hpp"

namespace dtrain_torch {

double seconds(std::chrono::milliseconds op, std::chrono::milliseconds group) {
  const auto ms = op.count() >= 0 ? op : group;
  return static_cast<double>(ms.count()) / 1000.0;
}

ProcessGroupDtrain::ProcessGroupDtrain(GroupSpec spec)
    : TorchBackend(spec.rank, spec.size),
      name_(std::move(spec.name)),
      torch_name_(std::move(spec.torch_name)),
      global_ranks_(std::move(spec.global_ranks)),
      timeout_(spec.timeout),
      devices_(make_device_context()) {
  TORCH_CHECK(spec.store, "dtrain backend: no store for group '", name_, "'");
  store_ = std::make_unique<StoreBridge>(spec.store);
  dtrain_config_t config = DTRAIN_CONFIG_INITIALIZER;
  config.rank = spec.rank;
  config.size = spec.size;
  config.store = store_->table();
  config.timeout_s = seconds(timeout_, timeout_);
  const char* transport = std::getenv("DTRAIN_TRANSPORT");  // unset or empty: the library's choice
  config.transport = transport != nullptr && *transport != '\0' ? transport : nullptr;
  config.name = name_.c_str();
  const dtrain_status_t st = dtrain_comm_init_config(&config, &comm_);
  if (st != DTRAIN_SUCCESS) {
    const char* text = dtrain_last_error();
    throw std::runtime_error("dtrain backend: rank " + std::to_string(spec.rank) + " of " + std::to_string(spec.size) +
                             " could not join group '" + name_ + "': " + (text && *text ? text : "") + " (" +
                             dtrain_status_string(st) + ")");
  }
  current_timeout_s_ = config.timeout_s;
  OpQueue::Hooks hooks;
  hooks.before = [this](DtrainWork& w) { apply_timeout(w); };
  hooks.pair = [this](DtrainWork& s, DtrainWork& r) { run_pair(s, r); };
  hooks.interrupt = [this](const std::string& why) { interrupt(why); };
  hooks.deadline_s = [this](const DtrainWork& w) { return deadline_s(w); };
  queue_ = std::make_unique<OpQueue>(std::move(hooks));
  init();
}

ProcessGroupDtrain::~ProcessGroupDtrain() { shutdown_group(); }

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::enqueue(Op op, DtrainWork::Body body,
                                                           std::optional<DtrainWork::PointToPoint> p2p) {
  const at::Device device = device_of(op.tensors, op.name);
  auto work = c10::make_intrusive<DtrainWork>(rank_, op.type, op.name, std::move(op.outputs), op.timeout,
                                              std::move(body));
  if (p2p) work->set_p2p(std::move(*p2p));
  if (!device.is_cpu()) work->set_device(devices_->issue(device), std::move(op.tensors));
  {
    std::lock_guard<std::mutex> lock(batch_mutex_);
    if (coalescing_) {
      ++seq_;
      batch_.push_back(work);
      return work;
    }
  }
  queue_->push(work);
  ++seq_;
  if (!op.async) wait_without_gil(*work);  // asyncOp false: done (or on the caller's stream) on return
  return work;
}

void ProcessGroupDtrain::apply_timeout(DtrainWork& work) {
  const double s = deadline_s(work);
  if (s == current_timeout_s_) return;
  check(dtrain_comm_set_timeout(comm_, s), "setting the op's timeout");
  current_timeout_s_ = s;
}

double ProcessGroupDtrain::deadline_s(const DtrainWork& work) const { return seconds(work.timeout(), timeout_); }

void ProcessGroupDtrain::check(dtrain_status_t st, const char* op) const {
  if (st == DTRAIN_SUCCESS) return;
  const char* text = dtrain_last_error();
  throw std::runtime_error("dtrain backend: " + std::string(op) + " failed on rank " + std::to_string(rank_) +
                           " of group '" + name_ + "' (" + std::to_string(size_) +
                           " ranks): " + (text && *text ? text : "no details") + " (" + dtrain_status_string(st) + ")");
}

void ProcessGroupDtrain::check_root(int64_t root, const char* op) const {
  TORCH_CHECK(root >= 0 && root < size_, "dtrain backend: ", op, " root rank ", root, " is not in 0 .. ", size_ - 1);
}

}  // namespace dtrain_torch
