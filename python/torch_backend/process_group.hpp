// ProcessGroupDtrain: torch.distributed's backend "dtrain" over dtrain's public C ABI: a c10d::Backend
// registered for the devices "cpu" and "cuda" on torch 2.x, a c10d::ProcessGroup on torch 1.13
// (torch_compat.hpp). Each group is its own communicator, bootstrapped through the store torch hands
// the group; its ops run in issue order on the group's thread (OpQueue) and return Work. CPU tensors
// go to dtrain's CPU engines, CUDA tensors to its NCCL path on the group's stream (device.hpp).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "device.hpp"
#include "op_queue.hpp"
#include "store_bridge.hpp"
#include "tensor_args.hpp"

namespace dtrain_torch {

// What a group is made with: the store torch hands it, this rank's place, its timeout, its name in
// dtrain's messages ("world", "group 1 (ranks 0,2)"), torch's name for it and its ranks in the world.
struct GroupSpec {
  c10::intrusive_ptr<c10d::Store> store;
  int rank = 0;
  int size = 1;
  std::chrono::milliseconds timeout{0};
  std::string name;
  std::string torch_name;
  std::vector<uint64_t> global_ranks;
};

class ProcessGroupDtrain : public TorchBackend {
 public:
  explicit ProcessGroupDtrain(GroupSpec spec);
  ~ProcessGroupDtrain() override;

  const std::string getBackendName() const override { return "dtrain"; }

  // Coalescing (process_group_batch.cpp): the ops issued between start and end run as one batch,
  // their sends and receives as pairs that progress together; the batch is one Work.
#if DTRAIN_TORCH_TENSOR_COALESCED
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
#elif !DTRAIN_TORCH_BACKEND
  void startCoalescing() override;
  void endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& reqs) override;
#endif
#if DTRAIN_TORCH_BACKEND_LIFECYCLE
  bool supportsCoalescing() const override { return true; }
#endif

  // The group's call count: every rank of a group issues the same calls, so the numbers agree.
  void setSequenceNumberForGroup() override { seq_ = 0; }
  uint64_t getSequenceNumberForGroup() override { return seq_; }

  // Lifecycle (process_group_lifecycle.cpp). shutdown: the ops already issued run (each bounded by
  // its timeout), then the threads and the communicator go. abort: the op in flight and those queued
  // fail at once with `why`. Later ops are refused; both are idempotent.
  void shutdown_group();
  void abort_group(const std::string& why);
#if DTRAIN_TORCH_BACKEND_LIFECYCLE
  void shutdown() override { shutdown_group(); }
  void abort() override { abort_group("the process group was aborted"); }
#endif
#if DTRAIN_TORCH_EAGER_CONNECT
  bool supportsSplitting() const override { return true; }
  // init_process_group(device_id=...): the device communicator is made now instead of on first use.
  void eagerConnectSingleDevice(at::Device device) override;
#endif
#if DTRAIN_TORCH_BACKEND_SPLIT
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<c10d::Backend::Options>& opts) override;
  c10::intrusive_ptr<c10d::Backend::Options> getBackendOptions() override;
#endif

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
#if DTRAIN_TORCH_TENSOR_COALESCED
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
#endif

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
#if DTRAIN_TORCH_TENSOR_COALESCED
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
#endif
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

  // Every live group shuts down (dtrain.torch's atexit hook: before the interpreter finalizes, no group
  // thread may still run or need the GIL).
  static void shutdown_all();
  // Records a new group for shutdown_all().
  static void track(const c10::intrusive_ptr<ProcessGroupDtrain>& group);

 private:
  // An op as enqueue() takes it: what it is, the tensors it reads and writes (their device decides
  // where it runs), what its future completes with, its deadline and whether the caller waits for it
  // (asyncOp false), and its body (on the group's thread).
  struct Op {
    c10d::OpType type;
    const char* name;
    std::vector<at::Tensor> tensors;
    std::vector<at::Tensor> outputs;
    std::chrono::milliseconds timeout;
    bool async = true;
  };
  // Queues the op (or adds it to the batch being coalesced); returns its Work.
  c10::intrusive_ptr<c10d::Work> enqueue(Op op, DtrainWork::Body body,
                                         std::optional<DtrainWork::PointToPoint> p2p = std::nullopt);
  // On the group's thread: a queued send and receive as one dtrain_sendrecv (process_group_p2p.cpp).
  void run_pair(DtrainWork& send, DtrainWork& recv);
  // Lifecycle (process_group_lifecycle.cpp): the communicator goes once the threads are joined; an
  // abort (any thread) interrupts its call in flight.
  void release_comm();
  void interrupt(const std::string& why);
  // On the group's thread: the op's deadline onto the communicator.
  void apply_timeout(DtrainWork& work);
  double deadline_s(const DtrainWork& work) const;
  // On the group's thread: throws, naming the rank, the group and what dtrain said, unless st is
  // DTRAIN_SUCCESS.
  void check(dtrain_status_t st, const char* op) const;
  void check_root(int64_t root, const char* op) const;
  // On the group's thread: one reduce-scatter (all-gather) of `in` into `out` (process_group_reduce.cpp,
  // process_group_move.cpp).
  void reduce_scatter_into(const at::Tensor& out, const at::Tensor& in, const Reduction& red, const char* op,
                           void* stream);
  void allgather_into(const at::Tensor& out, const at::Tensor& in, const char* op, void* stream);
  // One reduction on the group's thread: a premultiplied sum gets its op made and destroyed around it.
  template <typename F>
  void with_op(const Reduction& r, const char* op, F&& call);

  std::string name_;
  std::string torch_name_;
  std::vector<uint64_t> global_ranks_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<StoreBridge> store_;
  dtrain_comm_t comm_ = nullptr;
  double current_timeout_s_ = 0;
  std::unique_ptr<DeviceContext> devices_;
  std::atomic<uint64_t> seq_{0};
  // The batch being coalesced (startCoalescing .. endCoalescing).
  std::mutex batch_mutex_;
  bool coalescing_ = false;
  std::vector<c10::intrusive_ptr<DtrainWork>> batch_;
  // comm_ between the threads' end and its release, against an abort that interrupts it meanwhile
  std::mutex comm_mutex_;
  std::unique_ptr<OpQueue> queue_;
#if DTRAIN_TORCH_BACKEND_SPLIT
  // torch splits a group once per device it is registered for: both get the same child.
  const c10d::Store* split_store_ = nullptr;
  std::vector<int> split_ranks_;
  c10::weak_intrusive_ptr<c10d::Backend> split_child_{c10::intrusive_ptr<c10d::Backend>()};
#endif
};

// The processes group's op deadline in seconds: the op's own when set, else the group's.
double seconds(std::chrono::milliseconds op, std::chrono::milliseconds group);

}  // namespace dtrain_torch
