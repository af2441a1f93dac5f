// One pipeline stage of the example: its layers, the activations it keeps between a micro-batch's
// forward and backward, and the interpreter of a step's actions (schedule.hpp) over the pipeline
// group's send/recv.
#pragma once

#include <dtrain/collectives.hpp>

#include <vector>

#include "mlp.hpp"
#include "schedule.hpp"

namespace pipeline {

// The batch plan `dtrain launch` hands the worker (DTRAIN_GLOBAL_BATCH, ...).
struct Batch {
  long global = 0, per_replica = 0, micro = 0, micro_size = 0, iters = 0, epochs = 0, dataset = 0;
};

class Stage {
 public:
  // `pipe`: this replica's pipeline group (its rank is the stage); `work_us`: --stage-work-us.
  Stage(dtrain::Communicator& pipe, const Shape& shape, int stage, int stages, long work_us);

  // Runs one step of `replica`'s share of iteration t (micro-batch u, row k is sample
  // (t*global + replica*per_replica + u*micro_size + k) mod dataset), adding the gradients to the
  // layers. Returns this step's loss over the replica's samples on the last stage, 0 elsewhere.
  double run(const std::vector<Action>& plan, const Batch& b, long t, int replica);

  std::vector<Layer>& layers() { return layers_; }
  const std::vector<Layer>& layers() const { return layers_; }
  int stage() const { return stage_; }
  // Seconds spent in forward and backward compute since construction.
  double busy_s() const { return busy_s_; }
  // The most micro-batches whose activations were held at once.
  int peak_live() const { return peak_live_; }

 private:
  struct Micro {
    std::vector<std::vector<double>> act;  // act[0]: the stage's input; act[i + 1]: layer i's output
    std::vector<double> grad;              // the loss's gradient with respect to the stage's output
    double loss = 0;
  };

  void forward(const Batch& b, long t, int replica, int u);
  void backward(const Batch& b, long t, int replica, int u);
  long sample_index(const Batch& b, long t, int replica, int u, long k) const;
  std::size_t in_count(const Batch& b) const;   // doubles in one micro-batch's input
  std::size_t out_count(const Batch& b) const;  // doubles in one micro-batch's output
  Micro& slot(int u);
  double* input(const Batch& b, int u);  // micro-batch u's input buffer, sized
  void release(int u);

  dtrain::Communicator& pipe_;
  Shape shape_;
  int stage_, stages_;
  long work_us_;
  std::vector<Layer> layers_;
  std::vector<Micro> micro_;
  std::vector<bool> live_;
  std::vector<double> dx_;  // the gradient sent to the previous stage
  double busy_s_ = 0;
  int live_count_ = 0, peak_live_ = 0;
};

}  // namespace pipeline
