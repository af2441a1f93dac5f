// The shared-memory engine's latency path (shm_box.cpp: allreduces up to kBoxBytes per rank without
// a sync), ranks as threads: every dtype and op at sizes around its limits (the 40 bytes that fit
// in the header line, the box itself, one element past it), in place and out of place, give bit for
// bit the reduction in rank order; thousands of calls of changing sizes between other collectives
// (the boxes are reused every other call without a sync) stay right; mismatched calls fail on every
// rank long before the deadline, a peer that destroys its communicator makes the waiting ranks
// fail, not hang, and one that destroys it right after its last call does not fail the others. A peer killed in the middle of such calls is in test_launch.cpp (real processes).
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "call.hpp"
#include "harness.hpp"
#include "reduce.hpp"

namespace {

const dtrain_op_t kOps[] = {DTRAIN_SUM, DTRAIN_PROD, DTRAIN_MIN, DTRAIN_MAX, DTRAIN_AVG};

// Byte sizes around the latency path's limits; each becomes the largest whole count of elements.
const std::size_t kBytes[] = {1, 2, 3, 7, 8, 24, 39, 40, 41, 48, 56, 63, 64, 65, 200, 1000, 1023,
                              2048, 4095, 4096, 4097, 4104};

// Rank r's input: values that round differently in every dtype (fp16/bf16 included).
std::vector<std::uint8_t> input(dtrain_dtype_t dt, std::size_t count, int r, std::uint64_t salt) {
  std::vector<std::uint8_t> buf(count * dtype_size(dt));
  for (std::size_t i = 0; i < count; ++i) {
    const auto k = static_cast<int>((i * 2654435761u + static_cast<std::size_t>(r) * 40503u + salt) % 23) - 11;
    const double x = k * 0.37 + r * 0.011;
    auto* p = buf.data() + i * dtype_size(dt);
    switch (dt) {
      case DTRAIN_INT8: *reinterpret_cast<std::int8_t*>(p) = static_cast<std::int8_t>(k); break;
      case DTRAIN_UINT8: *p = static_cast<std::uint8_t>(k + 11); break;
      case DTRAIN_INT32: *reinterpret_cast<std::int32_t*>(p) = k * 1000003; break;
      case DTRAIN_INT64: *reinterpret_cast<std::int64_t*>(p) = static_cast<std::int64_t>(k) << 40; break;
      case DTRAIN_FLOAT16: *reinterpret_cast<std::uint16_t*>(p) = float_to_half(static_cast<float>(x)); break;
      case DTRAIN_BFLOAT16: *reinterpret_cast<std::uint16_t*>(p) = float_to_bf16(static_cast<float>(x)); break;
      case DTRAIN_FLOAT32: *reinterpret_cast<float*>(p) = static_cast<float>(x); break;
      case DTRAIN_FLOAT64: *reinterpret_cast<double*>(p) = x; break;
      case DTRAIN_BOOL:
      case DTRAIN_INT16: break;  // not among the dtypes tested here
    }
  }
  return buf;
}

// The reduction in rank order of every rank's input: what each rank must get, bit for bit.
std::vector<std::uint8_t> reference(dtrain_dtype_t dt, dtrain_op_t op, std::size_t count, int ranks,
                                    std::uint64_t salt) {
  std::vector<std::vector<std::uint8_t>> in;
  std::vector<const void*> srcs;
  for (int r = 0; r < ranks; ++r) in.push_back(input(dt, count, r, salt));
  for (const auto& b : in) srcs.push_back(b.data());
  std::vector<std::uint8_t> out(count * dtype_size(dt));
  reduce_n(srcs.data(), ranks, out.data(), nullptr, count, dt, op, op == DTRAIN_AVG ? ranks : 1);
  return out;
}

}  // namespace

TEST_SUITE("collectives::shm_box") {
  TEST_CASE("every dtype and op, sizes around the line and the box, in place and not: rank-order results") {
    for (int ranks : {2, 3, 5}) {
      CAPTURE(ranks);
      World w;
      w.size = ranks;
      auto errors = run_ranks(w, [&](Communicator& c, int r) {
        REQUIRE(std::string(c.engine_name()) == "shm");
        for (auto dt : kAllDtypes)
          for (auto op : kOps)
            for (std::size_t bytes : kBytes)
              for (bool in_place : {false, true}) {
                const std::size_t count = bytes / dtype_size(dt);
                if (count == 0) continue;
                const std::uint64_t salt = bytes * 31 + static_cast<std::uint64_t>(op);
                auto send = input(dt, count, r, salt);
                std::vector<std::uint8_t> recv(send.size(), 0xee);
                void* dst = in_place ? send.data() : recv.data();
                c.allreduce(send.data(), dst, count, dt, op);
                const auto& got = in_place ? send : recv;
                if (got != reference(dt, op, count, ranks, salt))
                  throw std::runtime_error("rank " + std::to_string(r) + ": wrong result for dtype " +
                                           std::to_string(dt) + " op " + std::to_string(op) + " bytes " +
                                           std::to_string(bytes) + (in_place ? " in place" : ""));
              }
      });
      no_errors(errors);
    }
  }

  TEST_CASE("thousands of calls of changing sizes between other collectives: every result exact") {
    // The boxes are reused every other latency-path call without a sync; slot-path allreduces,
    // broadcasts and barriers in between take other paths. Integer sums are exact.
    World w;
    w.size = 3;
    auto errors = run_ranks(w, [&](Communicator& c, int r) {
      std::vector<std::int64_t> a, b;
      for (int it = 0; it < 3000; ++it) {
        const std::size_t count = it % 7 == 6 ? 2000 : static_cast<std::size_t>(1 + (it * 37) % 512);
        a.resize(count);
        b.assign(count, -1);
        for (std::size_t i = 0; i < count; ++i)
          a[i] = static_cast<std::int64_t>(it) * 1000 + static_cast<std::int64_t>(i) + r;
        c.allreduce(a.data(), b.data(), count, DTRAIN_INT64, DTRAIN_SUM);
        for (std::size_t i = 0; i < count; ++i)
          if (b[i] != 3 * (static_cast<std::int64_t>(it) * 1000 + static_cast<std::int64_t>(i)) + 3)
            throw std::runtime_error("rank " + std::to_string(r) + " call " + std::to_string(it) + ": element " +
                                     std::to_string(i) + " is " + std::to_string(b[i]));
        if (it % 11 == 0) c.barrier();
        if (it % 13 == 0) {
          std::int64_t v = r == 1 ? it : -1;
          c.broadcast(&v, &v, 1, DTRAIN_INT64, 1);
          if (v != it) throw std::runtime_error("broadcast between allreduces: wrong value");
        }
      }
    });
    no_errors(errors);
  }

  TEST_CASE("mismatched calls in and around the latency path fail on every rank well before the deadline") {
    // 0: sizes that differ within the header line; 1: within the box; 2: the box against the slot
    // path (no box ever comes); 3: the box against a broadcast (syncs).
    for (int variant = 0; variant < 4; ++variant) {
      CAPTURE(variant);
      World w;
      w.size = 2;
      w.timeout = 60s;
      std::vector<dtrain_status_t> st(2, DTRAIN_SUCCESS);
      std::vector<std::string> text(2);
      const auto t0 = std::chrono::steady_clock::now();
      auto errors = run_ranks(w, [&](Communicator& c, int r) {
        std::vector<float> a(4096, 1.0f), b(4096);
        c.allreduce(a.data(), b.data(), 3, DTRAIN_FLOAT32, DTRAIN_SUM);
        const std::size_t counts[3][2] = {{2, 3}, {100, 900}, {4, 4000}};
        auto res = status_of([&] {
          if (variant == 3 && r == 1)
            c.broadcast(a.data(), b.data(), 4, DTRAIN_FLOAT32, 0);
          else
            c.allreduce(a.data(), b.data(), variant == 3 ? 4 : counts[variant][r], DTRAIN_FLOAT32, DTRAIN_SUM);
        });
        st[static_cast<std::size_t>(r)] = res.first;
        text[static_cast<std::size_t>(r)] = res.second;
      });
      CHECK(std::chrono::steady_clock::now() - t0 < 20s);
      for (int r = 0; r < 2; ++r) {
        CAPTURE(r);
        CHECK(errors[static_cast<std::size_t>(r)].empty());
        CHECK_MESSAGE(st[static_cast<std::size_t>(r)] == DTRAIN_ERR_MISMATCH, text[static_cast<std::size_t>(r)]);
        const auto& m = text[static_cast<std::size_t>(r)];
        CHECK_MESSAGE(m.find("#2") != std::string::npos, m);
      }
    }
  }

  TEST_CASE("a peer that destroys its communicator while the others wait in the latency path: they fail") {
    World w;
    w.size = 3;
    w.timeout = 60s;
    std::vector<dtrain_status_t> st(3, DTRAIN_SUCCESS);
    std::vector<std::string> text(3);
    auto store = dtrain::rdzv::make_memory_store();
    std::vector<std::thread> ts;
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < 3; ++r)
      ts.emplace_back([&, r] {
        auto c = std::make_unique<Communicator>(config_for(w, r), store);
        double x = 1.0;
        c->allreduce(&x, &x, 1, DTRAIN_FLOAT64, DTRAIN_SUM);
        if (r == 2) {
          std::this_thread::sleep_for(50ms);  // the others are waiting by now
          c.reset();
          return;
        }
        auto res = status_of([&] { c->allreduce(&x, &x, 1, DTRAIN_FLOAT64, DTRAIN_SUM); });
        st[static_cast<std::size_t>(r)] = res.first;
        text[static_cast<std::size_t>(r)] = res.second;
      });
    for (auto& t : ts) t.join();
    CHECK(std::chrono::steady_clock::now() - t0 < 20s);
    for (int r : {0, 1}) {
      CAPTURE(r);
      CHECK_MESSAGE(st[static_cast<std::size_t>(r)] == DTRAIN_ERR_PEER, text[static_cast<std::size_t>(r)]);
      CHECK(text[static_cast<std::size_t>(r)].find("rank 2") != std::string::npos);
    }
  }
  TEST_CASE("peers that destroy their communicators right after their last call: the call completes everywhere") {
    // A rank that finds a peer gone must still take the contribution the peer left before it went
    // (more ranks than cores, so that ranks are descheduled between their looks).
    for (int round = 0; round < 400; ++round) {
      CAPTURE(round);
      World w;
      w.size = 5;
      auto store = dtrain::rdzv::make_memory_store();
      std::vector<std::string> errors(5);
      std::vector<std::thread> ts;
      for (int r = 0; r < 5; ++r)
        ts.emplace_back([&, r] {
          auto c = std::make_unique<Communicator>(config_for(w, r), store);
          double x = r + 1.0;
          auto res = status_of([&] { c->allreduce(&x, &x, 1, DTRAIN_FLOAT64, DTRAIN_MIN); });
          if (res.first != DTRAIN_SUCCESS) errors[static_cast<std::size_t>(r)] = res.second;
          else if (x != 1.0) errors[static_cast<std::size_t>(r)] = "wrong minimum";
          c.reset();
        });
      for (auto& t : ts) t.join();
      for (const auto& e : errors) REQUIRE_MESSAGE(e.empty(), e);
    }
  }
}
