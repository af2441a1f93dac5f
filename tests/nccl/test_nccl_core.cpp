// The NCCL backend's parts that run without a GPU (the unique-id exchange with real ncclGetUniqueId,
// type mapping, error paths, device-pointer routing); the init failures of a machine without a
// usable CUDA device (suite nccl::core::no_gpu, need "no-gpu"); and on a machine with one a real
// one-rank communicator (suite nccl::core::gpu, need "gpu"). ctest runs each suite on its own
// (tests/nccl/CMakeLists.txt); the needs are checked before any case runs (tests/test_needs.hpp).
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <string>
#include <latch>
#include <vector>

#include "nccl_core.hpp"
#include "test_needs.hpp"

using namespace dtrain;
using namespace dtrain::coll::nccl;
using std::chrono::milliseconds;

namespace {

const dtrain::test::Need need_gpu("gpu", [] {
  return usable_device_count() > 0 ? std::string() : "no usable CUDA device (" + device_probe_error() + ")";
});
const dtrain::test::Need need_no_gpu("no-gpu", [] {
  return usable_device_count() == 0 ? std::string() : std::string("this machine has a usable CUDA device");
});

Clock::time_point in(milliseconds d) { return Clock::now() + d; }

template <class F>
dtrain_status_t status_of(F&& f) {
  try {
    f();
  } catch (const coll::nccl::Error& e) {
    return e.status();
  }
  return DTRAIN_SUCCESS;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

}  // namespace

TEST_SUITE("nccl::core") {
  TEST_CASE("ncclGetUniqueId works without a GPU and gives fresh 128-byte ids") {
    rdzv::Bytes a = new_unique_id();
    rdzv::Bytes b = new_unique_id();
    CHECK(a.size() == 128);
    CHECK(b.size() == 128);
    CHECK(a != b);
    CHECK(hex(a).size() == 256);
  }

  TEST_CASE("the unique id exchange: every rank gets rank 0's bytes under nccl/id") {
    auto store = rdzv::make_memory_store();
    constexpr int n = 4;
    std::vector<std::future<rdzv::Bytes>> ranks;
    // Non-root ranks start first (the root waits for all of them to say so), so they wait for the key.
    std::latch started(n - 1);
    for (int r = n - 1; r >= 0; --r)
      ranks.push_back(std::async(std::launch::async, [&store, &started, r] {
        if (r == 0) started.wait();
        else started.count_down();
        return exchange_unique_id(*store, r, 0, in(milliseconds(20000)), new_unique_id);
      }));
    std::vector<rdzv::Bytes> ids;
    for (auto& f : ranks) ids.push_back(f.get());
    for (const auto& id : ids) CHECK(id == ids.front());
    CHECK(store->get("nccl/id", milliseconds(0)) == ids.front());
    CHECK(id_key(0) == "nccl/id");
    CHECK(id_key(2) == "nccl/2/id");
    CHECK(failed_key(0) == "nccl/failed");
  }

  TEST_CASE("a second communicator instance uses its own key") {
    auto store = rdzv::make_memory_store();
    rdzv::Bytes first = exchange_unique_id(*store, 0, 0, in(milliseconds(1000)), new_unique_id);
    auto peer = std::async(std::launch::async,
                           [&] { return exchange_unique_id(*store, 1, 1, in(milliseconds(20000)), new_unique_id); });
    rdzv::Bytes second = exchange_unique_id(*store, 0, 1, in(milliseconds(1000)), new_unique_id);
    CHECK(peer.get() == second);
    CHECK(second != first);
  }

  TEST_CASE("waiting for rank 0 times out with a clear message") {
    auto store = rdzv::make_memory_store();
    std::string what;
    dtrain_status_t status = DTRAIN_SUCCESS;
    try {
      exchange_unique_id(*store, 3, 0, in(milliseconds(200)), new_unique_id);
    } catch (const coll::nccl::Error& e) {
      status = e.status();
      what = e.what();
    }
    CHECK(status == DTRAIN_ERR_TIMEOUT);
    CHECK(what.find("rank 3") != std::string::npos);
    CHECK(what.find("rank 0") != std::string::npos);
    CHECK(what.find("'nccl/id'") != std::string::npos);
  }

  TEST_CASE("a failure of rank 0 before its id reaches the waiting ranks at once") {
    auto store = rdzv::make_memory_store();
    auto waiter = std::async(std::launch::async, [&] {
      std::string what;
      dtrain_status_t status = DTRAIN_SUCCESS;
      try {
        exchange_unique_id(*store, 1, 0, in(milliseconds(60000)), new_unique_id);
      } catch (const coll::nccl::Error& e) {
        status = e.status();
        what = e.what();
      }
      return std::make_pair(status, what);
    });
    publish_failure(store.get(), 0, 0, "no usable CUDA device (test)");
    auto [status, what] = waiter.get();
    CHECK(status == DTRAIN_ERR_PEER);
    CHECK(what.find("rank 0 could not set up NCCL: no usable CUDA device (test)") != std::string::npos);
    CHECK(published_failure(*store, 0) == "rank 0: no usable CUDA device (test)");
    // A failure published after the id leaves the id alone; the first failure wins.
    auto other = rdzv::make_memory_store();
    rdzv::Bytes id = exchange_unique_id(*other, 0, 0, in(milliseconds(1000)), new_unique_id);
    publish_failure(other.get(), 0, 0, "late");
    publish_failure(other.get(), 2, 0, "later");
    CHECK(other->get("nccl/id", milliseconds(0)) == id);
    CHECK(published_failure(*other, 0) == "rank 0: late");
    CHECK(published_failure(*store, 1).empty());
  }

  TEST_CASE("a value that is not an id is reported, not used") {
    auto store = rdzv::make_memory_store();
    store->set("nccl/id", rdzv::as_bytes("short"));
    std::string what = message_of([&] { exchange_unique_id(*store, 1, 0, in(milliseconds(1000)), new_unique_id); });
    CHECK(what.find("holds 5 bytes, not a 128-byte NCCL unique id") != std::string::npos);
    try {
      exchange_unique_id(*store, 1, 0, in(milliseconds(1000)), new_unique_id);
      FAIL("a junk id was used");
    } catch (const coll::nccl::Error& e) {
      CHECK(e.status() == DTRAIN_ERR_PEER);  // a peer's (or another program's) value, not the library's fault
    }
  }

  TEST_CASE("dtype and op mapping") {
    CHECK(to_nccl(DTRAIN_INT8) == ncclInt8);
    CHECK(to_nccl(DTRAIN_UINT8) == ncclUint8);
    CHECK(to_nccl(DTRAIN_INT32) == ncclInt32);
    CHECK(to_nccl(DTRAIN_INT64) == ncclInt64);
    CHECK(to_nccl(DTRAIN_FLOAT16) == ncclFloat16);
    CHECK(to_nccl(DTRAIN_BFLOAT16) == ncclBfloat16);
    CHECK(to_nccl(DTRAIN_FLOAT32) == ncclFloat32);
    CHECK(to_nccl(DTRAIN_FLOAT64) == ncclFloat64);
    CHECK(to_nccl(DTRAIN_SUM) == ncclSum);
    CHECK(to_nccl(DTRAIN_PROD) == ncclProd);
    CHECK(to_nccl(DTRAIN_MIN) == ncclMin);
    CHECK(to_nccl(DTRAIN_MAX) == ncclMax);
    CHECK(to_nccl(DTRAIN_AVG) == ncclAvg);
    CHECK(dtype_size(DTRAIN_BFLOAT16) == 2);
    CHECK(dtype_size(DTRAIN_INT64) == 8);
    volatile int bad_dtype = 42, bad_op = 9;  // what a C caller could pass
    const auto dtype = static_cast<dtrain_dtype_t>(bad_dtype);
    const auto op = static_cast<dtrain_op_t>(bad_op);
    CHECK(status_of([&] { to_nccl(dtype); }) == DTRAIN_ERR_INVALID_ARGUMENT);
    CHECK(status_of([&] { to_nccl(op); }) == DTRAIN_ERR_INVALID_ARGUMENT);
    CHECK(message_of([&] { to_nccl(dtype); }).find("dtype 42") != std::string::npos);
  }

  TEST_CASE("errors carry NCCL's and CUDA's own text") {
    std::string nccl = message_of([] { check_nccl(ncclInvalidArgument, "ncclAllReduce"); });
    CHECK(nccl.find("ncclAllReduce: invalid argument") == 0);
    CHECK(status_of([] { check_nccl(ncclSystemError, "x"); }) == DTRAIN_ERR_NCCL);
    std::string cuda = message_of([] { check_cuda(cudaErrorMemoryAllocation, "cudaMalloc"); });
    CHECK(cuda.find("cudaMalloc: cudaErrorMemoryAllocation") == 0);
    CHECK(status_of([] { check_cuda(cudaErrorInvalidValue, "x"); }) == DTRAIN_ERR_CUDA);
    CHECK_NOTHROW(check_nccl(ncclSuccess, "ok"));
    CHECK_NOTHROW(check_cuda(cudaSuccess, "ok"));
  }

  TEST_CASE("host buffers are never device pointers") {
    std::vector<float> heap(16);
    float stack[4] = {};
    CHECK_FALSE(is_device_pointer(heap.data()));
    CHECK_FALSE(is_device_pointer(stack));
    CHECK_FALSE(is_device_pointer(nullptr));
    CHECK(device_of(heap.data()) == -1);
    CHECK(built_with_nccl());
  }

  TEST_CASE("bad options are configuration errors") {
    auto store = rdzv::make_memory_store();
    Options o;
    o.store = nullptr;
    CHECK_THROWS_AS(Communicator{o}, ConfigError);
    o.store = store.get();
    o.rank = 2;
    o.size = 2;
    CHECK_THROWS_AS(Communicator{o}, ConfigError);
  }
}

TEST_SUITE("nccl::core::no_gpu") {
  TEST_CASE("without a usable GPU, init fails fast with a clear CUDA error on every rank") {
    REQUIRE(usable_device_count() == 0);
    CHECK_FALSE(device_probe_error().empty());
    auto store = rdzv::make_memory_store();
    constexpr int n = 2;
    std::vector<std::future<std::pair<dtrain_status_t, std::string>>> ranks;
    for (int r = 0; r < n; ++r)
      ranks.push_back(std::async(std::launch::async, [&store, r] {
        Options o;
        o.rank = r;
        o.size = n;
        o.local_rank = r;
        o.store = store.get();
        o.timeout = milliseconds(60000);  // failing must not mean waiting for this
        dtrain_status_t status = DTRAIN_SUCCESS;
        std::string what;
        try {
          Communicator comm(o);
        } catch (const coll::nccl::Error& e) {
          status = e.status();
          what = e.what();
        }
        return std::make_pair(status, what);
      }));
    for (int r = 0; r < n; ++r) {
      auto [status, what] = ranks[static_cast<std::size_t>(r)].get();
      CAPTURE(what);
      CHECK(status == DTRAIN_ERR_CUDA);
      CHECK(what.find(fmt::format("rank {}: no usable CUDA device for the NCCL backend", r)) == 0);
      CHECK(what.find("cudaGetDeviceCount") != std::string::npos);
    }
    // Rank 0 left its reason where waiting ranks look.
    CHECK(published_failure(*store, 0).find("no usable CUDA device") != std::string::npos);
  }

  TEST_CASE("without a driver, the NCCL init call itself fails with NCCL's reason, no hang") {
    REQUIRE(usable_device_count() == 0);
    // Bypass device selection to exercise the real non-blocking ncclCommInitRankConfig path.
    auto store = rdzv::make_memory_store();
    Options o;
    o.store = store.get();
    o.timeout = milliseconds(60000);
    std::string what;
    dtrain_status_t status = DTRAIN_SUCCESS;
    try {
      Communicator comm(new_unique_id(), o, 0);
    } catch (const coll::nccl::Error& e) {
      status = e.status();
      what = e.what();
    }
    CAPTURE(what);
    // cudaSetDevice fails first without a driver; with a driver but no device NCCL would report.
    CHECK((status == DTRAIN_ERR_CUDA || status == DTRAIN_ERR_NCCL));
    CHECK_FALSE(what.empty());
  }

}

TEST_SUITE("nccl::core::gpu") {
  TEST_CASE("DTRAIN_CUDA_DEVICE out of range is a configuration error") {
    REQUIRE(usable_device_count() > 0);
    ::setenv("DTRAIN_CUDA_DEVICE", "99", 1);
    Options o;
    CHECK_THROWS_WITH_AS(select_device(o), doctest::Contains("DTRAIN_CUDA_DEVICE=99"), ConfigError);
    ::unsetenv("DTRAIN_CUDA_DEVICE");
  }

  TEST_CASE("one rank on a real GPU: all five operations, sync and on a stream") {
    REQUIRE(usable_device_count() > 0);
    auto store = rdzv::make_memory_store();
    Options o;
    o.store = store.get();
    o.timeout = milliseconds(60000);
    Communicator comm(o);
    constexpr std::size_t n = 1000;
    float* d = nullptr;
    REQUIRE(cudaMalloc(&d, 2 * n * sizeof(float)) == cudaSuccess);
    CHECK(is_device_pointer(d));
    CHECK(device_of(d) == comm.device());
    std::vector<float> host(n);
    for (std::size_t i = 0; i < n; ++i) host[i] = static_cast<float>(i);
    REQUIRE(cudaMemcpy(d, host.data(), n * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess);
    comm.allreduce(d, d + n, n, DTRAIN_FLOAT32, DTRAIN_SUM, nullptr);
    comm.allreduce(d + n, d + n, n, DTRAIN_FLOAT32, DTRAIN_AVG, nullptr);
    comm.broadcast(d + n, d + n, n, DTRAIN_FLOAT32, 0, nullptr);
    comm.allgather(d + n, d, n, DTRAIN_FLOAT32, nullptr);
    comm.reduce_scatter(d, d, n, DTRAIN_FLOAT32, DTRAIN_MAX, nullptr);
    comm.barrier();
    cudaStream_t s = nullptr;
    REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
    comm.allreduce(d, d + n, n, DTRAIN_FLOAT32, DTRAIN_SUM, s);
    REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
    std::vector<float> back(n);
    REQUIRE(cudaMemcpy(back.data(), d + n, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(back == host);
    std::vector<float> wrong(n);
    CHECK(status_of([&] { comm.allreduce(wrong.data(), d, n, DTRAIN_FLOAT32, DTRAIN_SUM, nullptr); }) ==
          DTRAIN_ERR_INVALID_ARGUMENT);
    CHECK(status_of([&] { comm.broadcast(d, d, n, DTRAIN_FLOAT32, 1, nullptr); }) == DTRAIN_ERR_INVALID_ARGUMENT);
    cudaStreamDestroy(s);
    cudaFree(d);
  }
}
