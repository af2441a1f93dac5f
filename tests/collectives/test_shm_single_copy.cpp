// The shared-memory engine's single-copy allreduce (shm_single_copy.cpp), ranks as threads (which
// reach each other's memory through process_vm_readv/writev like processes of one user): every dtype
// and op, sizes that split unevenly over the ranks and the chunks, in place and out of place, give
// bit for bit what the slot path gives (the reduction order is the same), and exact sums where the
// arithmetic is exact. A peer dying during the copy is in test_launch.cpp (real processes).
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "engine.hpp"
#include "harness.hpp"
#include "reduce.hpp"

using namespace dtrain::coll;
using dtrain::coll::test::no_errors;
using dtrain::coll::test::run_ranks;
using dtrain::coll::test::World;

namespace {

const dtrain_dtype_t kDtypes[] = {DTRAIN_INT8,    DTRAIN_UINT8,    DTRAIN_INT32,   DTRAIN_INT64,
                                  DTRAIN_FLOAT16, DTRAIN_BFLOAT16, DTRAIN_FLOAT32, DTRAIN_FLOAT64};
const dtrain_op_t kOps[] = {DTRAIN_SUM, DTRAIN_AVG, DTRAIN_MAX, DTRAIN_PROD};
// Element counts above the latency path (32 KiB) for every dtype, uneven over 2 and 3 ranks and
// over the 128 KiB copy chunks.
const std::size_t kCounts[] = {40961, 300007};

// Rank r's element i: small values, exact in every dtype (fp16 and bf16 included).
void fill(std::vector<std::uint8_t>& buf, dtrain_dtype_t dt, std::size_t count, int r) {
  buf.resize(count * dtype_size(dt));
  for (std::size_t i = 0; i < count; ++i) {
    const int v = static_cast<int>((i * 7 + static_cast<std::size_t>(r) * 3) % 11) - (i % 3 == 0 ? 3 : 0);
    auto* p = buf.data() + i * dtype_size(dt);
    switch (dt) {
      case DTRAIN_INT8: *reinterpret_cast<std::int8_t*>(p) = static_cast<std::int8_t>(v); break;
      case DTRAIN_UINT8: *p = static_cast<std::uint8_t>(v + 3); break;
      case DTRAIN_INT32: *reinterpret_cast<std::int32_t*>(p) = v; break;
      case DTRAIN_INT64: *reinterpret_cast<std::int64_t*>(p) = v; break;
      case DTRAIN_FLOAT16: *reinterpret_cast<std::uint16_t*>(p) = float_to_half(static_cast<float>(v) * 0.5f); break;
      case DTRAIN_BFLOAT16: *reinterpret_cast<std::uint16_t*>(p) = float_to_bf16(static_cast<float>(v) * 0.5f); break;
      case DTRAIN_FLOAT32: *reinterpret_cast<float*>(p) = static_cast<float>(v) * 0.25f; break;
      case DTRAIN_FLOAT64: *reinterpret_cast<double*>(p) = static_cast<double>(v) * 0.125; break;
      case DTRAIN_BOOL:
      case DTRAIN_INT16: break;  // not among the dtypes tested here
    }
  }
}

using Key = std::tuple<int, int, std::size_t, bool, int>;  // dtype, op, count, in place, rank

// Every combination on `ranks` threads with the given single-copy threshold: results by key.
std::map<Key, std::vector<std::uint8_t>> run_all(int ranks, std::size_t single_copy_bytes) {
  World w;
  w.size = ranks;
  w.single_copy_bytes = single_copy_bytes;
  std::map<Key, std::vector<std::uint8_t>> out;
  std::mutex mu;
  auto errors = run_ranks(w, [&](Communicator& c, int r) {
    std::vector<std::uint8_t> send, recv;
    for (auto dt : kDtypes)
      for (auto op : kOps)
        for (auto count : kCounts)
          for (bool in_place : {false, true}) {
            fill(send, dt, count, r);
            recv.assign(send.size(), 0xee);
            void* dst = in_place ? send.data() : recv.data();
            c.allreduce(send.data(), dst, count, dt, op);
            std::lock_guard<std::mutex> lock(mu);
            out[Key{dt, op, count, in_place, r}] = in_place ? send : recv;
          }
  });
  no_errors(errors);
  return out;
}

}  // namespace

TEST_SUITE("collectives::shm_single_copy") {
  TEST_CASE("every dtype and op, uneven sizes, in place and not: the slot path's results bit for bit") {
    for (int ranks : {2, 3}) {
      CAPTURE(ranks);
      auto direct = run_all(ranks, 4096);
      auto slots = run_all(ranks, 0);
      REQUIRE(direct.size() == slots.size());
      for (const auto& [key, bytes] : direct) {
        CAPTURE(std::get<0>(key));
        CAPTURE(std::get<1>(key));
        CAPTURE(std::get<2>(key));
        CAPTURE(std::get<3>(key));
        CAPTURE(std::get<4>(key));
        CHECK(bytes == slots.at(key));
      }
      // Exact sums, independent of either path.
      for (auto count : kCounts) {
        const auto& got = direct.at(Key{DTRAIN_INT32, DTRAIN_SUM, count, false, ranks - 1});
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < count; ++i) {
          std::int32_t want = 0;
          for (int r = 0; r < ranks; ++r)
            want += static_cast<int>((i * 7 + static_cast<std::size_t>(r) * 3) % 11) - (i % 3 == 0 ? 3 : 0);
          std::int32_t v;
          std::memcpy(&v, got.data() + i * 4, 4);
          wrong += v != want;
        }
        CHECK(wrong == 0);
      }
    }
  }

  TEST_CASE("a 5 MiB float32 allreduce over 3 ranks: every element exact") {
    World w;
    w.size = 3;
    const std::size_t count = (5u << 20) / 4 + 13;
    auto errors = run_ranks(w, [&](Communicator& c, int r) {
      std::vector<float> a(count), b(count, -1.0f);
      for (std::size_t i = 0; i < count; ++i) a[i] = static_cast<float>(static_cast<int>(i % 97) + r);
      c.allreduce(a.data(), b.data(), count, DTRAIN_FLOAT32, DTRAIN_SUM);
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < count; ++i) wrong += b[i] != static_cast<float>(3 * static_cast<int>(i % 97) + 3);
      if (wrong != 0) throw std::runtime_error(std::to_string(wrong) + " wrong elements on rank " + std::to_string(r));
    });
    no_errors(errors);
  }
}
