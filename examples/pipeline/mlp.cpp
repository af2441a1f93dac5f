// The model and data of the pipeline example (mlp.hpp).
#include "mlp.hpp"

#include <time.h>

#include <algorithm>
#include <cmath>

namespace pipeline {

namespace {

// splitmix64: the data and the initial weights are pure functions of their indices.
std::uint64_t mix(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Uniform in [-1, 1).
double uniform(std::uint64_t key) {
  return static_cast<double>(mix(key) >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

double thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

}  // namespace

std::pair<int, int> stage_layers(int layers, int stages, int stage) {
  return {stage * layers / stages, (stage + 1) * layers / stages};
}

double sample(long i, int dim, double* x) {
  double s = 0;
  for (int j = 0; j < dim; ++j) {
    x[j] = uniform(static_cast<std::uint64_t>(i) * 1315423911ULL + static_cast<std::uint64_t>(j));
    s += (j % 2 ? -0.7 : 0.9) * x[j] / (1.0 + 0.25 * j);
  }
  const double second = dim > 1 ? x[0] * x[1] : 0.0;
  return 0.8 * std::sin(s) + 0.3 * second + 0.01 * uniform(static_cast<std::uint64_t>(i) * 2654435761ULL + 0xfeedULL);
}

std::vector<Layer> make_layers(const Shape& shape, int first, int last) {
  std::vector<Layer> out;
  for (int l = first; l < last; ++l) {
    Layer L;
    L.index = l;
    L.in = shape.in(l);
    L.out = shape.out(l);
    L.tanh = l != shape.layers - 1;
    const auto n = static_cast<std::size_t>(L.in) * static_cast<std::size_t>(L.out);
    L.w.resize(n);
    const double scale = std::sqrt(6.0 / (L.in + L.out));
    for (std::size_t k = 0; k < n; ++k)
      L.w[k] = scale * uniform(0x5eed0000ULL + static_cast<std::uint64_t>(l) * 1000003ULL + k);
    L.b.assign(static_cast<std::size_t>(L.out), 0.0);
    L.gw.assign(n, 0.0);
    L.gb.assign(L.b.size(), 0.0);
    out.push_back(std::move(L));
  }
  return out;
}

void forward(const Layer& l, const double* x, int rows, double* y) {
  for (int r = 0; r < rows; ++r) {
    const double* xr = x + static_cast<std::ptrdiff_t>(r) * l.in;
    double* yr = y + static_cast<std::ptrdiff_t>(r) * l.out;
    for (int o = 0; o < l.out; ++o) {
      const double* wo = l.w.data() + static_cast<std::ptrdiff_t>(o) * l.in;
      double z = l.b[static_cast<std::size_t>(o)];
      for (int i = 0; i < l.in; ++i) z += wo[i] * xr[i];
      yr[o] = l.tanh ? std::tanh(z) : z;
    }
  }
}

void backward(Layer& l, const double* x, const double* y, const double* dy, int rows, double* dx) {
  std::vector<double> dz(static_cast<std::size_t>(l.out));
  for (int r = 0; r < rows; ++r) {
    const double* xr = x + static_cast<std::ptrdiff_t>(r) * l.in;
    const double* yr = y + static_cast<std::ptrdiff_t>(r) * l.out;
    const double* dyr = dy + static_cast<std::ptrdiff_t>(r) * l.out;
    for (int o = 0; o < l.out; ++o) dz[static_cast<std::size_t>(o)] = l.tanh ? dyr[o] * (1.0 - yr[o] * yr[o]) : dyr[o];
    for (int o = 0; o < l.out; ++o) {
      const double d = dz[static_cast<std::size_t>(o)];
      double* gwo = l.gw.data() + static_cast<std::ptrdiff_t>(o) * l.in;
      for (int i = 0; i < l.in; ++i) gwo[i] += d * xr[i];
      l.gb[static_cast<std::size_t>(o)] += d;
    }
    if (dx == nullptr) continue;
    double* dxr = dx + static_cast<std::ptrdiff_t>(r) * l.in;
    for (int i = 0; i < l.in; ++i) {
      double s = 0;
      for (int o = 0; o < l.out; ++o) s += dz[static_cast<std::size_t>(o)] * l.w[static_cast<std::size_t>(o * l.in + i)];
      dxr[i] = s;
    }
  }
}

namespace {

// Each layer's `w` member then its `b` member, concatenated over the layers.
std::vector<double> concat(const std::vector<Layer>& layers, std::vector<double> Layer::*w, std::vector<double> Layer::*b) {
  std::vector<double> out;
  for (const auto& l : layers) {
    out.insert(out.end(), (l.*w).begin(), (l.*w).end());
    out.insert(out.end(), (l.*b).begin(), (l.*b).end());
  }
  return out;
}

}  // namespace

std::vector<double> flatten(const std::vector<Layer>& layers) { return concat(layers, &Layer::w, &Layer::b); }

std::vector<double> flatten_grads(const std::vector<Layer>& layers) { return concat(layers, &Layer::gw, &Layer::gb); }

void zero_grads(std::vector<Layer>& layers) {
  for (auto& l : layers) {
    std::fill(l.gw.begin(), l.gw.end(), 0.0);
    std::fill(l.gb.begin(), l.gb.end(), 0.0);
  }
}

void spin_cpu_us(long us) {
  if (us <= 0) return;
  const double until = thread_cpu_us() + static_cast<double>(us);
  volatile double sink = 0;
  double a = 1.0;
  do {
    for (int k = 0; k < 256; ++k) a = a * 1.0000001 + 1e-9;
    sink = sink + a;
  } while (thread_cpu_us() < until);
}

}  // namespace pipeline
