// A worker for a GPU machine (scripts/gpu-check.sh runs it under `dtrain launch`, one rank per GPU;
// one rank works: its peers are then itself): point-to-point and split on device buffers through
// the C ABI, every result copied back and checked.
//   1. a split made before any device call: its NCCL communicator comes from its own unique id
//      (the group's store keys), then an allreduce on it;
//   2. sendrecv around the ring (next / previous rank; itself with one rank) for float32, int64 and
//      bfloat16 of 1 .. 4M elements, with a CUDA stream and without;
//   3. a split after the world has an NCCL communicator (ncclCommSplit) and a split of that split,
//      each with an allreduce and a ring sendrecv; host point-to-point alongside;
//   4. a receive whose count differs from the send: DTRAIN_ERR_MISMATCH before NCCL runs (the
//      last call: the communicator is failed afterwards).
// Prints "rank R nccl p2p ok" and exits 0, else says what differed and exits 1.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dtrain/collectives.hpp"

namespace {

int g_rank = -1;

void need(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

void cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

template <class T>
struct Device {
  explicit Device(std::size_t n) : count(n) {
    void* p = nullptr;
    cuda(cudaMalloc(&p, n * sizeof(T)), "cudaMalloc");
    ptr = static_cast<T*>(p);
  }
  ~Device() { cudaFree(ptr); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  void put(const std::vector<T>& v) { cuda(cudaMemcpy(ptr, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), "H2D"); }
  std::vector<T> get() const {
    std::vector<T> v(count);
    cuda(cudaMemcpy(v.data(), ptr, count * sizeof(T), cudaMemcpyDeviceToHost), "D2H");
    return v;
  }
  T* ptr = nullptr;
  std::size_t count;
};

// A ring sendrecv of n elements of T on device buffers, checked.
template <class T>
void ring(dtrain::Communicator& c, std::size_t n, dtrain_dtype_t dtype, void* stream) {
  const int size = c.size(), r = c.rank(), next = (r + 1) % size, prev = (r + size - 1) % size;
  std::vector<T> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<T>((i * 7 + static_cast<std::size_t>(r) * 3) % 101);
  Device<T> s(n), d(n);
  s.put(out);
  c.sendrecv(s.ptr, n, dtype, next, 5, d.ptr, n, dtype, prev, 5, stream);
  if (stream != nullptr) cuda(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
  const std::vector<T> in = d.get();
  for (std::size_t i = 0; i < n; i += 1 + n / 1000)
    need(in[i] == static_cast<T>((i * 7 + static_cast<std::size_t>(prev) * 3) % 101),
         "ring data from rank " + std::to_string(prev) + " at " + std::to_string(i));
}

void allreduce_check(dtrain::Communicator& c) {
  Device<float> x(1024);
  x.put(std::vector<float>(1024, 1.0f));
  c.allreduce(x.ptr, x.ptr, 1024, DTRAIN_FLOAT32, DTRAIN_SUM);
  need(x.get()[1023] == static_cast<float>(c.size()), "allreduce on a split communicator");
}

void run() {
  int devices = 0;
  cuda(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
  const char* lr = std::getenv("LOCAL_RANK");
  cuda(cudaSetDevice((lr ? std::atoi(lr) : 0) % devices), "cudaSetDevice");
  dtrain::Communicator world;
  g_rank = world.rank();
  // 1. A split before any device call: lazy NCCL from the group's own unique id.
  dtrain::Communicator early = world.split(0, -world.rank());
  allreduce_check(early);
  // 2. Rings on the world.
  cudaStream_t stream = nullptr;
  cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
  for (std::size_t n : {std::size_t{1}, std::size_t{1000}, std::size_t{4} << 20}) {
    ring<float>(world, n, DTRAIN_FLOAT32, nullptr);
    ring<std::int64_t>(world, n, DTRAIN_INT64, stream);
    ring<std::uint16_t>(world, n, DTRAIN_BFLOAT16, nullptr);  // bit patterns travel unchanged
  }
  // 3. ncclCommSplit: the world has an NCCL communicator now; and a split of that split.
  allreduce_check(world);
  dtrain::Communicator half = world.split(world.rank() % 2, world.rank());
  allreduce_check(half);
  ring<double>(half, 100000, DTRAIN_FLOAT64, nullptr);
  dtrain::Communicator quarter = half.split(0, half.rank());
  allreduce_check(quarter);
  ring<float>(quarter, 12345, DTRAIN_FLOAT32, stream);
  double h = world.rank(), got = -1;
  world.sendrecv(&h, 1, DTRAIN_FLOAT64, (world.rank() + 1) % world.size(), 0, &got, 1, DTRAIN_FLOAT64,
                 (world.rank() + world.size() - 1) % world.size(), 0);
  need(got == (world.rank() + world.size() - 1) % world.size(), "host sendrecv next to device ones");
  // 4. A count mismatch is reported from the descriptions, before NCCL runs.
  Device<float> a(100), b(100);
  try {
    world.sendrecv(a.ptr, 100, DTRAIN_FLOAT32, (world.rank() + 1) % world.size(), 9, b.ptr, 99, DTRAIN_FLOAT32,
                   (world.rank() + world.size() - 1) % world.size(), 9);
    need(false, "a count mismatch on device buffers was not reported");
  } catch (const dtrain::coll_error& e) {
    need(e.status() == DTRAIN_ERR_MISMATCH && std::strstr(e.what(), "count 99") != nullptr,
         std::string("device mismatch: ") + e.what());
  }
  cudaStreamDestroy(stream);
}

}  // namespace

int main() {
  try {
    run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", g_rank, e.what());
    return 1;
  }
  std::printf("rank %d nccl p2p ok\n", g_rank);
  return 0;
}
