// The NCCL backend's operations of C ABI 0.3 (nccl_exchange.cpp, nccl_core.cpp's mapping): without a
// GPU, how bool, int16 and the bitwise ops map or are refused (suite nccl::ops); on a machine with a
// usable CUDA device (suite nccl::ops::gpu, need "gpu"), one rank's reduce, gather, scatter,
// alltoallv, a premultiplied sum and a bool reduction on device buffers against host results.
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "nccl_core.hpp"
#include "test_needs.hpp"

using namespace dtrain;
using namespace dtrain::coll::nccl;

namespace {

const dtrain::test::Need need_gpu("gpu", [] {
  return usable_device_count() > 0 ? std::string() : "no usable CUDA device (" + device_probe_error() + ")";
});

template <class F>
std::pair<dtrain_status_t, std::string> status_of(F&& f) {
  try {
    f();
  } catch (const coll::nccl::Error& e) {
    return {e.status(), e.what()};
  }
  return {DTRAIN_SUCCESS, ""};
}

}  // namespace

TEST_SUITE("nccl::ops") {
  TEST_CASE("bool maps through uint8: or as max, and as min; what NCCL lacks is refused") {
    CHECK(to_nccl(DTRAIN_BOOL) == ncclUint8);
    for (auto op : {DTRAIN_SUM, DTRAIN_MAX, DTRAIN_BOR}) CHECK(to_nccl(DTRAIN_BOOL, op) == ncclMax);
    for (auto op : {DTRAIN_PROD, DTRAIN_MIN, DTRAIN_BAND}) CHECK(to_nccl(DTRAIN_BOOL, op) == ncclMin);
    CHECK(to_nccl(DTRAIN_INT32, DTRAIN_SUM) == ncclSum);
    CHECK(status_of([] { to_nccl(DTRAIN_BOOL, DTRAIN_BXOR); }).first == DTRAIN_ERR_UNSUPPORTED);
    CHECK(status_of([] { to_nccl(DTRAIN_BOOL, DTRAIN_AVG); }).first == DTRAIN_ERR_INVALID_ARGUMENT);
    for (auto op : {DTRAIN_BAND, DTRAIN_BOR, DTRAIN_BXOR}) {
      auto [st, text] = status_of([&] { to_nccl(DTRAIN_INT32, op); });
      CHECK(st == DTRAIN_ERR_UNSUPPORTED);
      CHECK_MESSAGE(text.find("bitwise") != std::string::npos, text);
    }
    auto [st, text] = status_of([] { to_nccl(DTRAIN_INT16); });
    CHECK(st == DTRAIN_ERR_UNSUPPORTED);
    CHECK_MESSAGE(text.find("int16") != std::string::npos, text);
    CHECK(status_of([] { to_nccl(DTRAIN_PREMUL_SUM); }).first == DTRAIN_ERR_INVALID_ARGUMENT);
    CHECK(dtype_size(DTRAIN_BOOL) == 1);
    CHECK(dtype_size(DTRAIN_INT16) == 2);
  }
}

TEST_SUITE("nccl::ops::gpu") {
  TEST_CASE("one rank on a real GPU: reduce, gather, scatter, alltoallv, premul_sum, bool") {
    REQUIRE(usable_device_count() > 0);
    auto store = rdzv::make_memory_store();
    Options o;
    o.store = store.get();
    o.timeout = std::chrono::milliseconds(60000);
    Communicator comm(o);
    constexpr std::size_t n = 1000;
    float* d = nullptr;
    REQUIRE(cudaMalloc(&d, 2 * n * sizeof(float)) == cudaSuccess);
    std::vector<float> host(n), back(n);
    for (std::size_t i = 0; i < n; ++i) host[i] = static_cast<float>(i);
    auto upload = [&] { REQUIRE(cudaMemcpy(d, host.data(), n * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess); };
    auto download = [&](const float* p) {
      REQUIRE(cudaMemcpy(back.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
    };
    upload();
    comm.reduce(d, d + n, n, DTRAIN_FLOAT32, DTRAIN_SUM, nullptr, 0, nullptr);
    download(d + n);
    CHECK(back == host);
    comm.gather(d, d + n, n, DTRAIN_FLOAT32, 0, nullptr);
    download(d + n);
    CHECK(back == host);
    comm.scatter(d, d + n, n, DTRAIN_FLOAT32, 0, nullptr);
    download(d + n);
    CHECK(back == host);
    const std::size_t counts[1] = {n}, displs[1] = {0};
    comm.alltoallv(d, counts, displs, d + n, counts, displs, DTRAIN_FLOAT32, nullptr);
    download(d + n);
    CHECK(back == host);
    const double half = 0.5;
    comm.allreduce(d, d + n, n, DTRAIN_FLOAT32, DTRAIN_SUM, nullptr, &half);
    download(d + n);
    for (std::size_t i = 0; i < n; ++i) CHECK(back[i] == host[i] * 0.5f);
    comm.reduce_scatter(d, d + n, n, DTRAIN_FLOAT32, DTRAIN_SUM, nullptr, &half);
    comm.reduce(d, d + n, n, DTRAIN_FLOAT32, DTRAIN_SUM, &half, 0, nullptr);
    download(d + n);
    CHECK(back[10] == 5.0f);
    auto* flags = reinterpret_cast<std::uint8_t*>(d);
    std::vector<std::uint8_t> f = {0, 1, 1, 0}, fb(4);
    REQUIRE(cudaMemcpy(flags, f.data(), 4, cudaMemcpyHostToDevice) == cudaSuccess);
    comm.allreduce(flags, flags + 8, 4, DTRAIN_BOOL, DTRAIN_BOR, nullptr);
    REQUIRE(cudaMemcpy(fb.data(), flags + 8, 4, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(fb == f);
    CHECK(status_of([&] { comm.allreduce(d, d + n, n, DTRAIN_INT32, DTRAIN_BXOR, nullptr); }).first ==
          DTRAIN_ERR_UNSUPPORTED);
    CHECK(status_of([&] { comm.reduce(d, d + n, n, DTRAIN_FLOAT32, DTRAIN_SUM, nullptr, 1, nullptr); }).first ==
          DTRAIN_ERR_INVALID_ARGUMENT);
    cudaFree(d);
  }
}
