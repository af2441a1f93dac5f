// Device-side fill for the GPU allreduce check: p[i] = pattern(i, rank), the same formula the
// host reference uses (allreduce_gpu.cpp), so 1 GiB buffers are set up at device speed.
#include <cuda_runtime.h>

#include <cstddef>

namespace {

__global__ void fill_kernel(float* p, std::size_t n, int rank) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    p[i] = static_cast<float>((i * 7 + static_cast<std::size_t>(rank) * 13) % 97);
}

}  // namespace

cudaError_t dtrain_bench_fill(float* p, std::size_t n, int rank, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  std::size_t blocks = (n + 255) / 256;
  if (blocks > 4096) blocks = 4096;
  fill_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(p, n, rank);
  return cudaGetLastError();
}
