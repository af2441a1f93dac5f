// The shared-memory engine's latency path (engine/shm/boxes.cpp: allreduces up to kBoxBytes per
// rank without a sync), local ranks as threads over one segment: every dtype and op at sizes around
// its limits (the 40 bytes that fit in the header line, the box itself), in place and out of place,
// give bit for bit the reduction in rank order; thousands of calls of changing sizes between the
// slot path and syncs (the boxes are reused every other call without a sync) stay right; mismatched
// calls fail on every rank long before the deadline; a peer that leaves while the others wait makes
// them fail, not hang, and peers that leave right after their last call do not fail the others. A
// peer killed in the middle of such calls is in test_launch.cpp (real processes).
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "call.hpp"
#include "reduce.hpp"
#include "shm_ranks.hpp"

using namespace dtrain::coll;
using namespace dtrain::coll::test;
using namespace std::chrono_literals;

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

// One allreduce of call d on the latency path.
void box_allreduce(LocalRank& rank, const OpDesc& d, const void* send, void* recv) {
  rank.peers.begin(d);
  rank.boxes.allreduce(d, static_cast<const std::uint8_t*>(send), static_cast<std::uint8_t*>(recv));
  rank.peers.end();
}

bool sleeping(const shm::Segment& s, std::uint32_t n) { return s.header().sleepers.load() >= n; }

}  // namespace

TEST_SUITE("collectives::shm::boxes") {
  TEST_CASE("every dtype and op, sizes around the line and the box, in place and not: rank-order results") {
    for (int ranks : {2, 3, 5}) {
      CAPTURE(ranks);
      LocalGroup g;
      g.size = ranks;
      // Each call's expected bytes, computed once for all ranks.
      std::map<std::tuple<int, int, std::size_t>, std::vector<std::uint8_t>> want;
      for (auto dt : kAllDtypes)
        for (auto op : kOps)
          for (std::size_t bytes : kBytes)
            if (const std::size_t count = bytes / dtype_size(dt); count != 0 && bytes <= shm::kBoxBytes)
              want[{dt, op, bytes}] = reference(dt, op, count, ranks, bytes * 31 + static_cast<std::uint64_t>(op));
      no_errors(on_local_ranks(g, [&](std::unique_ptr<LocalRank>& rank, int r) {
        std::uint64_t seq = 0;
        for (const auto& [call, expected] : want)
          for (bool in_place : {false, true}) {
            const auto [dt_i, op_i, bytes] = call;
            const auto dt = static_cast<dtrain_dtype_t>(dt_i);
            const auto op = static_cast<dtrain_op_t>(op_i);
            const std::size_t count = bytes / dtype_size(dt);
            auto send = input(dt, count, r, bytes * 31 + static_cast<std::uint64_t>(op));
            std::vector<std::uint8_t> recv(send.size(), 0xee);
            box_allreduce(*rank, op_desc(++seq, OpKind::allreduce, count, dt, 30s, op), send.data(),
                          in_place ? send.data() : recv.data());
            if ((in_place ? send : recv) != expected)
              throw std::runtime_error("rank " + std::to_string(r) + ": wrong result for dtype " + std::to_string(dt) +
                                       " op " + std::to_string(op) + " bytes " + std::to_string(bytes) +
                                       (in_place ? " in place" : ""));
          }
      }));
    }
  }

  TEST_CASE("thousands of calls of changing sizes between slot-path calls and syncs: every result exact") {
    // The boxes are reused every other latency-path call without a sync; slot-path allreduces and
    // syncs in between take other paths. Integer sums are exact.
    LocalGroup g;
    g.size = 3;
    no_errors(on_local_ranks(g, [&](std::unique_ptr<LocalRank>& rank, int r) {
      std::vector<std::int64_t> a, b;
      std::uint64_t seq = 0;
      for (int it = 0; it < 3000; ++it) {
        const std::size_t count = it % 7 == 6 ? 2000 : static_cast<std::size_t>(1 + (it * 37) % 512);
        a.resize(count);
        b.assign(count, -1);
        for (std::size_t i = 0; i < count; ++i)
          a[i] = static_cast<std::int64_t>(it) * 1000 + static_cast<std::int64_t>(i) + r;
        const OpDesc d = op_desc(++seq, OpKind::allreduce, count, DTRAIN_INT64);
        if (count * 8 <= shm::kBoxBytes) {
          box_allreduce(*rank, d, a.data(), b.data());
        } else {
          rank->peers.begin(d);
          rank->slots.allreduce(d, reinterpret_cast<const std::uint8_t*>(a.data()), reinterpret_cast<std::uint8_t*>(b.data()));
          rank->peers.end();
        }
        for (std::size_t i = 0; i < count; ++i)
          if (b[i] != 3 * (static_cast<std::int64_t>(it) * 1000 + static_cast<std::int64_t>(i)) + 3)
            throw std::runtime_error("rank " + std::to_string(r) + " call " + std::to_string(it) + ": element " +
                                     std::to_string(i) + " is " + std::to_string(b[i]));
        if (it % 11 == 0) {
          const OpDesc s = op_desc(++seq, OpKind::barrier, 0, DTRAIN_UINT8);
          rank->peers.begin(s);
          rank->barrier.sync(s);
          rank->peers.end();
        }
      }
    }));
  }

  TEST_CASE("mismatched calls in and around the latency path fail on every rank well before the deadline") {
    // 0: sizes that differ within the header line; 1: within the box; 2: the box against the slot
    // path (no box ever comes); 3: the box against a sync.
    for (int variant = 0; variant < 4; ++variant) {
      CAPTURE(variant);
      LocalGroup g;
      g.size = 2;
      std::vector<std::pair<dtrain_status_t, std::string>> got(2);
      const auto t0 = std::chrono::steady_clock::now();
      no_errors(on_local_ranks(g, [&](std::unique_ptr<LocalRank>& rank, int r) {
        std::vector<float> a(4096, 1.0f), b(4096);
        box_allreduce(*rank, op_desc(1, OpKind::allreduce, 3, DTRAIN_FLOAT32), a.data(), b.data());
        const std::size_t counts[3][2] = {{2, 3}, {100, 900}, {4, 4000}};
        const std::size_t count = variant == 3 ? 4 : counts[variant][r];
        const OpDesc d = op_desc(2, variant == 3 && r == 1 ? OpKind::broadcast : OpKind::allreduce, count, DTRAIN_FLOAT32);
        rank->peers.begin(d);
        got[static_cast<std::size_t>(r)] = run_call(*rank, [&] {
          const auto* in = reinterpret_cast<const std::uint8_t*>(a.data());
          auto* out = reinterpret_cast<std::uint8_t*>(b.data());
          if (d.kind == OpKind::broadcast)
            rank->slots.broadcast(d, in, out);
          else if (count * 4 > shm::kBoxBytes)
            rank->slots.allreduce(d, in, out);
          else
            rank->boxes.allreduce(d, in, out);
        });
      }));
      CHECK(std::chrono::steady_clock::now() - t0 < 20s);
      for (int r = 0; r < 2; ++r) {
        CAPTURE(r);
        CHECK_MESSAGE(got[static_cast<std::size_t>(r)].first == DTRAIN_ERR_MISMATCH, got[static_cast<std::size_t>(r)].second);
        CHECK(got[static_cast<std::size_t>(r)].second.find("#2") != std::string::npos);
      }
    }
  }

  TEST_CASE("a peer that leaves while the others sleep in the latency path: they fail naming it") {
    LocalGroup g;
    g.size = 3;
    g.spin_us = 0;
    std::vector<std::pair<dtrain_status_t, std::string>> got(3);
    no_errors(on_local_ranks(g, [&](std::unique_ptr<LocalRank>& rank, int r) {
      double x = 1.0;
      box_allreduce(*rank, op_desc(1, OpKind::allreduce, 1, DTRAIN_FLOAT64), &x, &x);
      if (r == 2) {
        if (!wait_until([&] { return sleeping(rank->segment, 2); }, 30s)) throw std::runtime_error("nobody slept");
        rank.reset();
        return;
      }
      got[static_cast<std::size_t>(r)] = status_of([&] { box_allreduce(*rank, op_desc(2, OpKind::allreduce, 1, DTRAIN_FLOAT64), &x, &x); });
    }));
    for (int r : {0, 1}) {
      CAPTURE(r);
      CHECK_MESSAGE(got[static_cast<std::size_t>(r)].first == DTRAIN_ERR_PEER, got[static_cast<std::size_t>(r)].second);
      CHECK(got[static_cast<std::size_t>(r)].second.find("rank 2") != std::string::npos);
    }
  }

  TEST_CASE("peers that leave right after their last call: the call completes everywhere") {
    // A rank that finds a peer gone must still take the contribution the peer left before it went
    // (more ranks than cores, so that ranks are descheduled between their looks).
    for (int round = 0; round < 400; ++round) {
      CAPTURE(round);
      LocalGroup g;
      g.size = 5;
      g.slot_bytes = 4096;
      g.p2p_bytes = 0;
      no_errors(on_local_ranks(g, [&](std::unique_ptr<LocalRank>& rank, int r) {
        double x = r + 1.0;
        box_allreduce(*rank, op_desc(1, OpKind::allreduce, 1, DTRAIN_FLOAT64, 30s, DTRAIN_MIN), &x, &x);
        if (x != 1.0) throw std::runtime_error("wrong minimum");
        rank.reset();
      }));
    }
  }
}
