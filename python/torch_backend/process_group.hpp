// ProcessGroupDtrain: torch.distributed's backend "dtrain" (c10d::ProcessGroup on torch 1.13) over
// dtrain's public C ABI. Each group is its own communicator, bootstrapped through the store torch
// hands the group; its ops run in issue order on the group's thread (OpQueue) and return Work.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "op_queue.hpp"
#include "store_bridge.hpp"
#include "tensor_args.hpp"

namespace dtrain_torch {

class ProcessGroupDtrain : public c10d::ProcessGroup {
 public:
  // Collective over the group's `size` ranks (through `store`); `name` labels the group in dtrain's
  // messages and progress pages ("world", "group 1").
  ProcessGroupDtrain(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                     std::chrono::milliseconds timeout, std::string name);
  ~ProcessGroupDtrain() override;

  const std::string getBackendName() const override { return "dtrain"; }
  // batch_isend_irecv: the batch runs once it is all queued (a send next to a receive runs with it).
  void startCoalescing() override { queue_->hold(); }
  void endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& /*reqs*/) override { queue_->release(); }

  // Reductions (process_group_reduce.cpp)
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;

  // Data movement (process_group_move.cpp)
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;

  // All-to-all (process_group_alltoall.cpp)
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits, std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;

  // Point-to-point and barrier (process_group_p2p.cpp)
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

 private:
  // Queues body as the group's next op; `outputs` complete its future.
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, const char* name, std::vector<at::Tensor> outputs,
                                         std::chrono::milliseconds timeout, DtrainWork::Body body,
                                         std::optional<DtrainWork::PointToPoint> p2p = std::nullopt);
  // On the group's thread: a queued send and receive as one dtrain_sendrecv (process_group_p2p.cpp).
  void run_pair(DtrainWork& send, DtrainWork& recv);
  // On the group's thread: the op's deadline onto the communicator.
  void apply_timeout(DtrainWork& work);
  // On the group's thread: throws, naming the rank, the group and what dtrain said, unless st is
  // DTRAIN_SUCCESS.
  void check(dtrain_status_t st, const char* op) const;
  void check_root(int64_t root, const char* op) const;
  // One reduction on the group's thread: a premultiplied sum gets its op made and destroyed around it.
  template <typename F>
  void with_op(const Reduction& r, const char* op, F&& call);

  std::string name_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<StoreBridge> store_;
  dtrain_comm_t comm_ = nullptr;
  double current_timeout_s_ = 0;
  std::unique_ptr<OpQueue> queue_;
};

// The processes group's op deadline in seconds: the op's own when set, else the group's.
double seconds(std::chrono::milliseconds op, std::chrono::milliseconds group);

}  // namespace dtrain_torch
