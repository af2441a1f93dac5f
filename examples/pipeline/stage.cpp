// One pipeline stage of the example (stage.hpp).
#include "stage.hpp"

#include <algorithm>
#include <chrono>

namespace pipeline {

namespace {

constexpr dtrain_dtype_t kF64 = DTRAIN_FLOAT64;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Stage::Stage(dtrain::Communicator& pipe, const Shape& shape, int stage, int stages, long work_us)
    : pipe_(pipe), shape_(shape), stage_(stage), stages_(stages), work_us_(work_us) {
  const auto [first, last] = stage_layers(shape.layers, stages, stage);
  layers_ = make_layers(shape, first, last);
}

long Stage::sample_index(const Batch& b, long t, int replica, int u, long k) const {
  return (t * b.global + replica * b.per_replica + u * b.micro_size + k) % b.dataset;
}

std::size_t Stage::in_count(const Batch& b) const {
  return static_cast<std::size_t>(b.micro_size) * static_cast<std::size_t>(layers_.front().in);
}

std::size_t Stage::out_count(const Batch& b) const {
  return static_cast<std::size_t>(b.micro_size) * static_cast<std::size_t>(layers_.back().out);
}

Stage::Micro& Stage::slot(int u) {
  const auto i = static_cast<std::size_t>(u);
  if (!live_[i]) {
    live_[i] = true;
    peak_live_ = std::max(peak_live_, ++live_count_);
  }
  return micro_[i];
}

double* Stage::input(const Batch& b, int u) {
  Micro& m = slot(u);
  m.act.resize(layers_.size() + 1);
  m.act[0].resize(in_count(b));
  return m.act[0].data();
}

void Stage::release(int u) {
  const auto i = static_cast<std::size_t>(u);
  live_[i] = false;
  --live_count_;
}

void Stage::forward(const Batch& b, long t, int replica, int u) {
  const auto t0 = std::chrono::steady_clock::now();
  const int rows = static_cast<int>(b.micro_size);
  double* x = input(b, u);  // received already unless this is the first stage
  if (stage_ == 0)
    for (int k = 0; k < rows; ++k)
      sample(sample_index(b, t, replica, u, k), shape_.input, x + static_cast<std::ptrdiff_t>(k) * shape_.input);
  Micro& m = slot(u);
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    m.act[i + 1].resize(static_cast<std::size_t>(rows) * static_cast<std::size_t>(layers_[i].out));
    pipeline::forward(layers_[i], m.act[i].data(), rows, m.act[i + 1].data());
    spin_cpu_us(work_us_);
  }
  busy_s_ += seconds_since(t0);
}

void Stage::backward(const Batch& b, long t, int replica, int u) {
  Micro& m = slot(u);
  const auto t0 = std::chrono::steady_clock::now();
  const int rows = static_cast<int>(b.micro_size);
  if (stage_ == stages_ - 1) {  // mean squared error over the replica's batch: 0.5 (pred - y)^2 / P
    std::vector<double> x(static_cast<std::size_t>(shape_.input));
    m.grad.resize(out_count(b));
    m.loss = 0;
    for (int k = 0; k < rows; ++k) {
      const double err = m.act.back()[static_cast<std::size_t>(k)] - sample(sample_index(b, t, replica, u, k), shape_.input, x.data());
      m.grad[static_cast<std::size_t>(k)] = err / static_cast<double>(b.per_replica);
      m.loss += 0.5 * err * err / static_cast<double>(b.per_replica);
    }
  }
  std::vector<double> dy = m.grad, dx;
  for (std::size_t i = layers_.size(); i-- > 0;) {
    const bool need_dx = i > 0 || stage_ > 0;
    dx.assign(need_dx ? static_cast<std::size_t>(rows) * static_cast<std::size_t>(layers_[i].in) : 0, 0.0);
    pipeline::backward(layers_[i], m.act[i].data(), m.act[i + 1].data(), dy.data(), rows, need_dx ? dx.data() : nullptr);
    spin_cpu_us(work_us_);
    dy.swap(dx);
  }
  dx_.swap(dy);  // the gradient with respect to the stage's input, for the previous stage
  busy_s_ += seconds_since(t0);
}

double Stage::run(const std::vector<Action>& plan, const Batch& b, long t, int replica) {
  double loss = 0;
  const int prev = stage_ - 1, next = stage_ + 1;
  micro_.resize(static_cast<std::size_t>(b.micro));  // no reallocation while references are held below
  live_.resize(micro_.size(), false);
  for (const Action& a : plan) {
    switch (a.op) {
      case Op::forward:
        forward(b, t, replica, a.micro);
        break;
      case Op::backward:
        backward(b, t, replica, a.micro);
        loss += slot(a.micro).loss;
        release(a.micro);
        break;
      case Op::recv_act:
        pipe_.recv(input(b, a.micro), in_count(b), kF64, prev, a.micro);
        break;
      case Op::send_act:
        pipe_.send(slot(a.micro).act.back().data(), out_count(b), kF64, next, a.micro);
        break;
      case Op::recv_grad: {
        Micro& m = slot(a.micro);
        m.grad.resize(out_count(b));
        pipe_.recv(m.grad.data(), m.grad.size(), kF64, next, a.micro);
        break;
      }
      case Op::send_grad:
        pipe_.send(dx_.data(), dx_.size(), kF64, prev, a.micro);
        break;
      case Op::send_act_recv_grad: {
        Micro& r = slot(a.other);
        r.grad.resize(out_count(b));
        pipe_.sendrecv(slot(a.micro).act.back().data(), out_count(b), kF64, next, a.micro, r.grad.data(), r.grad.size(),
                       kF64, next, a.other);
        break;
      }
      case Op::send_grad_recv_act: {
        pipe_.sendrecv(dx_.data(), dx_.size(), kF64, prev, a.micro, input(b, a.other), in_count(b),
                       kF64, prev, a.other);
        break;
      }
    }
  }
  return loss;
}

}  // namespace pipeline
