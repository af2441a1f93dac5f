#include "process_group.hpp"

#include <cmath>
#include <cstdlib>
#include <stdexcept>

namespace dtrain_torch {

double seconds(std::chrono::milliseconds op, std::chrono::milliseconds group) {
  const auto ms = op.count() >= 0 ? op : group;
  return static_cast<double>(ms.count()) / 1000.0;
}

ProcessGroupDtrain::ProcessGroupDtrain(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                       std::chrono::milliseconds timeout, std::string name)
    : c10d::ProcessGroup(rank, size), name_(std::move(name)), timeout_(timeout) {
  TORCH_CHECK(store, "dtrain backend: no store for group '", name_, "'");
  store_ = std::make_unique<StoreBridge>(store);
  dtrain_config_t config = DTRAIN_CONFIG_INITIALIZER;
  config.rank = rank;
  config.size = size;
  config.store = store_->table();
  config.timeout_s = seconds(timeout, timeout);
  const char* transport = std::getenv("DTRAIN_TRANSPORT");  // unset or empty: the library's choice
  config.transport = transport != nullptr && *transport != '\0' ? transport : nullptr;
  config.name = name_.c_str();
  const dtrain_status_t st = dtrain_comm_init_config(&config, &comm_);
  if (st != DTRAIN_SUCCESS) {
    const char* text = dtrain_last_error();
    throw std::runtime_error("dtrain backend: rank " + std::to_string(rank) + " of " + std::to_string(size) +
                             " could not join group '" + name_ + "': " + (text && *text ? text : "") + " (" +
                             dtrain_status_string(st) + ")");
  }
  current_timeout_s_ = config.timeout_s;
  queue_ = std::make_unique<OpQueue>([this](DtrainWork& w) { apply_timeout(w); },
                                     [this](DtrainWork& s, DtrainWork& r) { run_pair(s, r); });
  init();
}

ProcessGroupDtrain::~ProcessGroupDtrain() {
  queue_->stop("the process group was destroyed first");
  dtrain_comm_destroy(comm_);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDtrain::enqueue(c10d::OpType type, const char* name,
                                                           std::vector<at::Tensor> outputs,
                                                           std::chrono::milliseconds timeout, DtrainWork::Body body,
                                                           std::optional<DtrainWork::PointToPoint> p2p) {
  auto work = c10::make_intrusive<DtrainWork>(rank_, type, name, std::move(outputs), timeout, std::move(body));
  if (p2p) work->set_p2p(std::move(*p2p));
  queue_->push(work);
  return work;
}

void ProcessGroupDtrain::apply_timeout(DtrainWork& work) {
  const double s = seconds(work.timeout(), timeout_);
  if (s == current_timeout_s_) return;
  check(dtrain_comm_set_timeout(comm_, s), "setting the op's timeout");
  current_timeout_s_ = s;
}

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
