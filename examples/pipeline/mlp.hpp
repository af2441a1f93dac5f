// The model and data of the pipeline example, in float64: a multilayer perceptron of dense layers
// (tanh after every layer but the last) on a synthetic regression whose samples and initial weights
// are pure functions of their index, so every layout (stages x replicas x micro-batches) starts from
// the same weights and sees the same samples.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace pipeline {

// The layer sizes: input -> hidden -> .. -> hidden -> 1, `layers` dense layers in all.
struct Shape {
  int input = 8;
  int hidden = 16;
  int layers = 4;
  int in(int layer) const { return layer == 0 ? input : hidden; }
  int out(int layer) const { return layer == layers - 1 ? 1 : hidden; }
};

// Layers [first, last) of stage `stage` of `stages`: the layers divided contiguously, the later stages
// taking one more when they do not divide evenly. Needs stages <= layers.
std::pair<int, int> stage_layers(int layers, int stages, int stage);

// Sample i: its `dim` features (uniform in [-1, 1)) into x, returns its target.
double sample(long i, int dim, double* x);

struct Layer {
  int index = 0, in = 0, out = 0;
  bool tanh = true;                 // false for the model's last layer (a linear output)
  std::vector<double> w, b;         // out x in (row-major), out
  std::vector<double> gw, gb;       // gradient sums of the current step
  std::size_t params() const { return w.size() + b.size(); }
};

// Layers [first, last) of the model with their deterministic initial weights (Xavier-uniform from a
// hash of (layer, row, column); biases 0).
std::vector<Layer> make_layers(const Shape& shape, int first, int last);

// y (rows x out) = act(x (rows x in) W^T + b).
void forward(const Layer& l, const double* x, int rows, double* y);
// Adds this micro-batch's gradients to gw, gb from the layer's input x, output y and the loss's
// gradient dy with respect to y; writes the gradient with respect to x into dx unless it is null.
void backward(Layer& l, const double* x, const double* y, const double* dy, int rows, double* dx);

// The parameters of the layers, in order (each layer's w then b), and back.
std::vector<double> flatten(const std::vector<Layer>& layers);
std::vector<double> flatten_grads(const std::vector<Layer>& layers);
void zero_grads(std::vector<Layer>& layers);

// Spends `us` microseconds of this thread's CPU time on floating-point arithmetic whose result is
// discarded: --stage-work-us, a stand-in for a heavier layer that makes the schedule's idle time
// visible. CPU time, not wall time, so the work is the same however many processes share a core.
void spin_cpu_us(long us);

}  // namespace pipeline
