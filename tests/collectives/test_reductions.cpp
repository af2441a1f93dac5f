// The reductions of C ABI 0.3 through the communicator on every CPU engine (self, shm, tcp,
// hierarchical), ranks as threads: bool (or / and / xor), int16 (every op), the bitwise ops on every
// integer dtype, premultiplied sums on the floating dtypes, each through allreduce, reduce_scatter and
// reduce against a scalar reference; and the refusals: bitwise on floating dtypes, avg of bool, a
// premultiplied sum on integers or from another communicator, ranks that disagree on premul vs sum.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "harness.hpp"
#include "reduce.hpp"

namespace {

std::vector<World> engines() {
  std::vector<World> out;
  World w;
  w.size = 1;
  out.push_back(w);  // self
  w.size = 3;
  out.push_back(w);  // shm
  w.transport = "tcp";
  out.push_back(w);
  w.transport = "auto";
  w.size = 4;
  w.local_size = 2;
  out.push_back(w);  // hierarchical
  return out;
}

// Integer element i of rank r, as the dtype holds it.
std::int64_t ival(dtrain_dtype_t t, int r, std::size_t i) {
  const auto k = static_cast<std::int64_t>((i * 37 + static_cast<std::size_t>(r) * 101) % 251);
  if (t == DTRAIN_BOOL) return (i + static_cast<std::size_t>(r)) % 3 == 0 ? 1 : 0;
  if (t == DTRAIN_UINT8) return k;
  return k - 125;
}

void iput(void* b, std::size_t i, dtrain_dtype_t t, std::int64_t v) {
  switch (t) {
    case DTRAIN_INT8: static_cast<std::int8_t*>(b)[i] = static_cast<std::int8_t>(v); break;
    case DTRAIN_UINT8:
    case DTRAIN_BOOL: static_cast<std::uint8_t*>(b)[i] = static_cast<std::uint8_t>(v); break;
    case DTRAIN_INT16: static_cast<std::int16_t*>(b)[i] = static_cast<std::int16_t>(v); break;
    case DTRAIN_INT32: static_cast<std::int32_t*>(b)[i] = static_cast<std::int32_t>(v); break;
    case DTRAIN_INT64: static_cast<std::int64_t*>(b)[i] = v; break;
    default: break;
  }
}

std::int64_t iget(const void* b, std::size_t i, dtrain_dtype_t t) {
  switch (t) {
    case DTRAIN_INT8: return static_cast<const std::int8_t*>(b)[i];
    case DTRAIN_UINT8:
    case DTRAIN_BOOL: return static_cast<const std::uint8_t*>(b)[i];
    case DTRAIN_INT16: return static_cast<const std::int16_t*>(b)[i];
    case DTRAIN_INT32: return static_cast<const std::int32_t*>(b)[i];
    case DTRAIN_INT64: return static_cast<const std::int64_t*>(b)[i];
    default: return 0;
  }
}

// The scalar reference, reduced in rank order and wrapped to the dtype like the kernels.
std::int64_t iref(dtrain_dtype_t t, dtrain_op_t op, int n, std::size_t i) {
  std::vector<std::uint8_t> cell(8);
  auto wrap = [&](std::int64_t v) {
    iput(cell.data(), 0, t, v);
    return iget(cell.data(), 0, t);
  };
  std::int64_t acc = ival(t, 0, i);
  for (int r = 1; r < n; ++r) {
    const std::int64_t x = ival(t, r, i);
    if (t == DTRAIN_BOOL) {
      const bool is_or = op == DTRAIN_SUM || op == DTRAIN_MAX || op == DTRAIN_BOR;
      const bool is_and = op == DTRAIN_PROD || op == DTRAIN_MIN || op == DTRAIN_BAND;
      acc = is_or ? (acc | x) : is_and ? (acc & x) : (acc ^ x);
      continue;
    }
    switch (op) {
      case DTRAIN_SUM:
      case DTRAIN_AVG: acc = wrap(acc + x); break;
      case DTRAIN_PROD: acc = wrap(acc * x); break;
      case DTRAIN_MIN: acc = std::min(acc, x); break;
      case DTRAIN_MAX: acc = std::max(acc, x); break;
      case DTRAIN_BAND: acc = acc & x; break;
      case DTRAIN_BOR: acc = acc | x; break;
      case DTRAIN_BXOR: acc = wrap(acc ^ x); break;
      case DTRAIN_PREMUL_SUM: break;
    }
  }
  if (op == DTRAIN_AVG) acc /= n;  // truncation toward zero, like the kernels
  return acc;
}

struct Case {
  dtrain_dtype_t t;
  dtrain_op_t op;
};

std::vector<Case> integer_cases() {
  std::vector<Case> out;
  for (auto op : {DTRAIN_SUM, DTRAIN_PROD, DTRAIN_MIN, DTRAIN_MAX, DTRAIN_BAND, DTRAIN_BOR, DTRAIN_BXOR})
    out.push_back({DTRAIN_BOOL, op});
  for (auto op : {DTRAIN_SUM, DTRAIN_PROD, DTRAIN_MIN, DTRAIN_MAX, DTRAIN_AVG, DTRAIN_BAND, DTRAIN_BOR, DTRAIN_BXOR})
    out.push_back({DTRAIN_INT16, op});
  for (auto t : {DTRAIN_INT8, DTRAIN_UINT8, DTRAIN_INT32, DTRAIN_INT64})
    for (auto op : {DTRAIN_BAND, DTRAIN_BOR, DTRAIN_BXOR}) out.push_back({t, op});
  return out;
}

// allreduce, reduce_scatter and reduce of every integer case; "" or what went wrong.
std::string integers(Communicator& c, int r) {
  const int n = c.size();
  const auto un = static_cast<std::size_t>(n);
  for (const Case& k : integer_cases())
    for (std::size_t count : {std::size_t{1}, std::size_t{33}, std::size_t{5000}}) {
      const std::size_t esz = dtype_size(k.t);
      const std::string what = fmt::format("{} {} count {}", dtype_name(k.t), op_name(k.op), count);
      std::vector<std::uint8_t> send(count * un * esz), recv(count * un * esz, 0xEE);
      for (std::size_t i = 0; i < count * un; ++i) iput(send.data(), i, k.t, ival(k.t, r, i));
      c.allreduce(send.data(), recv.data(), count, k.t, k.op);
      for (std::size_t i = 0; i < count; ++i)
        if (iget(recv.data(), i, k.t) != iref(k.t, k.op, n, i))
          return fmt::format("allreduce {}: [{}] = {} want {}", what, i, iget(recv.data(), i, k.t), iref(k.t, k.op, n, i));
      c.reduce_scatter(send.data(), recv.data(), count, k.t, k.op);
      for (std::size_t i = 0; i < count; ++i) {
        const std::size_t g = static_cast<std::size_t>(r) * count + i;
        if (iget(recv.data(), i, k.t) != iref(k.t, k.op, n, g)) return fmt::format("reduce_scatter {}: [{}]", what, i);
      }
      c.reduce(send.data(), recv.data(), count, k.t, k.op, n - 1);
      if (r == n - 1)
        for (std::size_t i = 0; i < count; ++i)
          if (iget(recv.data(), i, k.t) != iref(k.t, k.op, n, i)) return fmt::format("reduce {}: [{}]", what, i);
    }
  return "";
}

double fval(int r, std::size_t i) { return static_cast<double>((i * 13 + static_cast<std::size_t>(r) * 7) % 31) - 15; }

// Premultiplied sums of every floating dtype through the three reducing calls.
std::string premul(Communicator& c, int r) {
  const int n = c.size();
  const auto un = static_cast<std::size_t>(n);
  const dtrain_op_t half = c.create_premul(0.5), third = c.create_premul(1.0 / 3.0);
  if (static_cast<int>(half) < PremulOps::kFirst || half == third) return "premul handles";
  for (auto t : {DTRAIN_FLOAT16, DTRAIN_BFLOAT16, DTRAIN_FLOAT32, DTRAIN_FLOAT64})
    for (auto [op, scale] : {std::pair{half, 0.5}, std::pair{third, 1.0 / 3.0}}) {
      const std::size_t count = 1500, esz = dtype_size(t);
      std::vector<double> d(count * un);
      for (std::size_t i = 0; i < d.size(); ++i) d[i] = fval(r, i);
      std::vector<std::uint8_t> send(d.size() * esz), recv(d.size() * esz);
      for (std::size_t i = 0; i < d.size(); ++i) {
        if (t == DTRAIN_FLOAT64) std::memcpy(send.data() + i * 8, &d[i], 8);
        if (t == DTRAIN_FLOAT32) reinterpret_cast<float*>(send.data())[i] = static_cast<float>(d[i]);
        if (t == DTRAIN_FLOAT16) reinterpret_cast<std::uint16_t*>(send.data())[i] = float_to_half(static_cast<float>(d[i]));
        if (t == DTRAIN_BFLOAT16) reinterpret_cast<std::uint16_t*>(send.data())[i] = float_to_bf16(static_cast<float>(d[i]));
      }
      auto get = [&](const std::vector<std::uint8_t>& b, std::size_t i) -> double {
        if (t == DTRAIN_FLOAT64) return reinterpret_cast<const double*>(b.data())[i];
        if (t == DTRAIN_FLOAT32) return static_cast<double>(reinterpret_cast<const float*>(b.data())[i]);
        const std::uint16_t h = reinterpret_cast<const std::uint16_t*>(b.data())[i];
        return static_cast<double>(t == DTRAIN_FLOAT16 ? half_to_float(h) : bf16_to_float(h));
      };
      const double tol = t == DTRAIN_FLOAT64 ? 1e-12 : t == DTRAIN_FLOAT32 ? 1e-5 : t == DTRAIN_FLOAT16 ? 0.02 : 0.15;
      auto want = [&](std::size_t i) {
        double s = 0;
        for (int q = 0; q < n; ++q) s += scale * fval(q, i);
        return s;
      };
      const std::vector<std::uint8_t> original = send;
      c.allreduce(send.data(), recv.data(), count, t, op);
      if (send != original) return "allreduce premul changed sendbuf";
      for (std::size_t i = 0; i < count; ++i)
        if (std::fabs(get(recv, i) - want(i)) > tol * (1 + std::fabs(want(i))))
          return fmt::format("allreduce premul {}: [{}] = {} want {}", dtype_name(t), i, get(recv, i), want(i));
      c.reduce_scatter(send.data(), recv.data(), count, t, op);
      for (std::size_t i = 0; i < count; ++i) {
        const std::size_t g = static_cast<std::size_t>(r) * count + i;
        if (std::fabs(get(recv, i) - want(g)) > tol * (1 + std::fabs(want(g))))
          return fmt::format("reduce_scatter premul {}: [{}]", dtype_name(t), i);
      }
      c.reduce(send.data(), send.data(), count, t, op, 0);  // in place at the root
      if (r == 0)
        for (std::size_t i = 0; i < count; ++i)
          if (std::fabs(get(send, i) - want(i)) > tol * (1 + std::fabs(want(i))))
            return fmt::format("reduce premul {}: [{}]", dtype_name(t), i);
    }
  c.destroy_premul(half);
  c.destroy_premul(third);
  return "";
}

}  // namespace

TEST_SUITE("collectives::reductions") {
  TEST_CASE("bool, int16 and the bitwise ops on every engine against the scalar reference") {
    for (const World& w : engines()) {
      CAPTURE(w.size);
      CAPTURE(w.transport);
      CAPTURE(w.local_size);
      std::vector<std::string> wrong(static_cast<std::size_t>(w.size));
      auto errors = run_ranks(w, [&](Communicator& c, int r) { wrong[static_cast<std::size_t>(r)] = integers(c, r); });
      for (int r = 0; r < w.size; ++r) {
        CAPTURE(r);
        CHECK(errors[static_cast<std::size_t>(r)] == "");
        CHECK(wrong[static_cast<std::size_t>(r)] == "");
      }
    }
  }

  TEST_CASE("premultiplied sums on every engine") {
    for (const World& w : engines()) {
      CAPTURE(w.size);
      CAPTURE(w.transport);
      std::vector<std::string> wrong(static_cast<std::size_t>(w.size));
      auto errors = run_ranks(w, [&](Communicator& c, int r) { wrong[static_cast<std::size_t>(r)] = premul(c, r); });
      for (int r = 0; r < w.size; ++r) {
        CAPTURE(r);
        CHECK(errors[static_cast<std::size_t>(r)] == "");
        CHECK(wrong[static_cast<std::size_t>(r)] == "");
      }
    }
  }

  TEST_CASE("combinations a dtype does not take are refused, and the communicator stays usable") {
    World w;
    w.size = 1;
    run_ranks(w, [&](Communicator& c, int) {
      double a[4] = {}, b[4] = {};
      auto refused = [&](auto f, const char* needle) {
        auto [st, text] = status_of(f);
        CHECK_MESSAGE(st == DTRAIN_ERR_INVALID_ARGUMENT, text);
        CHECK_MESSAGE(text.find(needle) != std::string::npos, text);
      };
      for (auto op : {DTRAIN_BAND, DTRAIN_BOR, DTRAIN_BXOR})
        refused([&] { c.allreduce(a, b, 4, DTRAIN_FLOAT64, op); }, "bitwise");
      refused([&] { c.reduce_scatter(a, b, 1, DTRAIN_FLOAT32, DTRAIN_BXOR); }, "float32");
      refused([&] { c.allreduce(a, b, 4, DTRAIN_BOOL, DTRAIN_AVG); }, "avg of bool");
      refused([&] { c.allreduce(a, b, 4, DTRAIN_FLOAT64, DTRAIN_PREMUL_SUM); }, "dtrain_redop_create_premul_sum");
      refused([&] { c.allreduce(a, b, 4, DTRAIN_FLOAT64, static_cast<dtrain_op_t>(300)); }, "invalid reduction op");
      const dtrain_op_t p = c.create_premul(2.0);
      refused([&] { c.allreduce(a, b, 4, DTRAIN_INT32, p); }, "floating dtype");
      c.destroy_premul(p);
      refused([&] { c.allreduce(a, b, 4, DTRAIN_FLOAT64, p); }, "invalid reduction op");  // destroyed
      CHECK(status_of([&] { c.destroy_premul(p); }).first == DTRAIN_ERR_INVALID_ARGUMENT);
      CHECK(status_of([&] { c.create_premul(NAN); }).first == DTRAIN_ERR_INVALID_ARGUMENT);
      c.allreduce(a, b, 4, DTRAIN_FLOAT64, DTRAIN_SUM);  // still usable
    });
  }

  TEST_CASE("ranks that disagree on premul_sum against sum are a mismatch") {
    for (const char* transport : {"auto", "tcp"}) {
      World w = world_of(2, transport, 20s);
      std::vector<std::pair<dtrain_status_t, std::string>> got(2);
      run_ranks(w, [&](Communicator& c, int r) {
        float a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[8];
        const dtrain_op_t p = c.create_premul(0.5);
        got[static_cast<std::size_t>(r)] = status_of([&] { c.allreduce(a, b, 8, DTRAIN_FLOAT32, r == 0 ? p : DTRAIN_SUM); });
      });
      for (int r = 0; r < 2; ++r) {
        CAPTURE(transport);
        CAPTURE(r);
        CHECK_MESSAGE(got[static_cast<std::size_t>(r)].first == DTRAIN_ERR_MISMATCH, got[static_cast<std::size_t>(r)].second);
      }
      const std::string& t = got[0].second;
      CHECK_MESSAGE(t.find("premul_sum") != std::string::npos, t);
    }
  }
}
