// The reduction kernels (reduce.cpp) against a scalar reference written here: every dtype, every
// op, 1..3 sources, lengths around the 1024-element tile and the vector widths, in place, the
// second output; fp16/bf16 through the element conversions one at a time (the vectorised kernels,
// generic or AVX2, must give the same bits), including subnormals, infinities and rounding ties.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "call.hpp"
#include "reduce.hpp"

using namespace dtrain::coll;

namespace {

// Element i of a buffer of dtype dt as a double, and back (the reference's arithmetic per dtype).
template <class T>
T op_apply(dtrain_op_t op, T a, T b) {
  switch (op) {
    case DTRAIN_SUM:
    case DTRAIN_AVG: return static_cast<T>(a + b);
    case DTRAIN_PROD: return static_cast<T>(a * b);
    case DTRAIN_MIN: return b < a ? b : a;
    case DTRAIN_MAX: return a < b ? b : a;
    case DTRAIN_BAND:
      if constexpr (std::is_integral_v<T>) return static_cast<T>(a & b);
      break;
    case DTRAIN_BOR:
      if constexpr (std::is_integral_v<T>) return static_cast<T>(a | b);
      break;
    case DTRAIN_BXOR:
      if constexpr (std::is_integral_v<T>) return static_cast<T>(a ^ b);
      break;
    case DTRAIN_PREMUL_SUM: break;
  }
  return a;
}

// bool: or for sum, max and bor; and for prod, min and band; xor for bxor.
std::uint8_t bool_apply(dtrain_op_t op, std::uint8_t a, std::uint8_t b) {
  switch (op) {
    case DTRAIN_SUM:
    case DTRAIN_MAX:
    case DTRAIN_BOR: return (a != 0 || b != 0) ? 1 : 0;
    case DTRAIN_PROD:
    case DTRAIN_MIN:
    case DTRAIN_BAND: return (a != 0 && b != 0) ? 1 : 0;
    case DTRAIN_BXOR: return (a != 0) != (b != 0) ? 1 : 0;
    case DTRAIN_AVG:
    case DTRAIN_PREMUL_SUM: break;
  }
  return 0xff;
}

// Scalar reference: one element at a time, sources in order, the average's division last.
std::vector<std::uint8_t> reference(const std::vector<std::vector<std::uint8_t>>& src, std::size_t count,
                                    dtrain_dtype_t dt, dtrain_op_t op) {
  const int div = op == DTRAIN_AVG ? static_cast<int>(src.size()) : 1;
  std::vector<std::uint8_t> out(count * dtype_size(dt));
  for (std::size_t i = 0; i < count; ++i) {
    auto get = [&](std::size_t j, auto tag) {
      decltype(tag) v;
      std::memcpy(&v, src[j].data() + i * sizeof(v), sizeof(v));
      return v;
    };
    auto put = [&](auto v) { std::memcpy(out.data() + i * sizeof(v), &v, sizeof(v)); };
    auto native = [&](auto tag) {
      using T = decltype(tag);
      T a = get(0, tag);
      for (std::size_t j = 1; j < src.size(); ++j) a = op_apply<T>(op, a, get(j, tag));
      if (div > 1) a = static_cast<T>(a / static_cast<T>(div));
      put(a);
    };
    auto narrow = [&](float (*load)(std::uint16_t), std::uint16_t (*store)(float)) {
      float a = load(get(0, std::uint16_t{}));
      for (std::size_t j = 1; j < src.size(); ++j) a = op_apply<float>(op, a, load(get(j, std::uint16_t{})));
      if (div > 1) a /= static_cast<float>(div);
      put(store(a));
    };
    switch (dt) {
      case DTRAIN_INT8: native(std::int8_t{}); break;
      case DTRAIN_UINT8: native(std::uint8_t{}); break;
      case DTRAIN_INT32: native(std::int32_t{}); break;
      case DTRAIN_INT64: native(std::int64_t{}); break;
      case DTRAIN_FLOAT16: narrow(half_to_float, float_to_half); break;
      case DTRAIN_BFLOAT16: narrow(bf16_to_float, float_to_bf16); break;
      case DTRAIN_FLOAT32: native(float{}); break;
      case DTRAIN_FLOAT64: native(double{}); break;
      case DTRAIN_INT16: native(std::int16_t{}); break;
      case DTRAIN_BOOL: {
        std::uint8_t a = get(0, std::uint8_t{});
        for (std::size_t j = 1; j < src.size(); ++j) a = bool_apply(op, a, get(j, std::uint8_t{}));
        put(a);
        break;
      }
    }
  }
  return out;
}

// Values that keep integer sums and products away from overflow (signed overflow is the kernels'
// wrap-around, not the reference's undefined behaviour); 16-bit floats get every bit pattern.
void fill(std::vector<std::uint8_t>& b, std::size_t count, dtrain_dtype_t dt, std::mt19937& rng) {
  b.resize(count * dtype_size(dt));
  for (std::size_t i = 0; i < count; ++i) {
    const auto r = rng();
    auto put = [&](auto v) { std::memcpy(b.data() + i * sizeof(v), &v, sizeof(v)); };
    switch (dt) {
      case DTRAIN_INT8: put(static_cast<std::int8_t>(static_cast<int>(r % 9) - 4)); break;
      case DTRAIN_UINT8: put(static_cast<std::uint8_t>(r % 5)); break;
      case DTRAIN_INT32: put(static_cast<std::int32_t>(r % 2001) - 1000); break;
      case DTRAIN_INT64: put(static_cast<std::int64_t>(r % 200001) - 100000); break;
      case DTRAIN_FLOAT16:
      case DTRAIN_BFLOAT16: put(static_cast<std::uint16_t>(r)); break;
      case DTRAIN_FLOAT32: put(static_cast<float>(static_cast<int>(r % 20001) - 10000) / 64.0f); break;
      case DTRAIN_FLOAT64: put(static_cast<double>(static_cast<int>(r % 20001) - 10000) / 128.0); break;
      case DTRAIN_INT16: put(static_cast<std::int16_t>(static_cast<int>(r % 201) - 100)); break;
      case DTRAIN_BOOL: put(static_cast<std::uint8_t>(r % 2)); break;
    }
  }
}

bool same_bits_or_both_nan(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b, dtrain_dtype_t dt) {
  if (dt != DTRAIN_FLOAT16 && dt != DTRAIN_BFLOAT16) return a == b;
  for (std::size_t i = 0; i + 1 < a.size(); i += 2) {
    std::uint16_t x, y;
    std::memcpy(&x, a.data() + i, 2);
    std::memcpy(&y, b.data() + i, 2);
    const auto nan = [&](std::uint16_t h) {
      return dt == DTRAIN_FLOAT16 ? std::isnan(half_to_float(h)) : std::isnan(bf16_to_float(h));
    };
    if (x != y && !(nan(x) && nan(y))) return false;
  }
  return true;
}


// The combinations the communicator lets through to the kernels.
bool takes(dtrain_dtype_t dt, dtrain_op_t op) {
  if (is_bitwise(op)) return !is_floating(dt);
  return !(dt == DTRAIN_BOOL && op == DTRAIN_AVG);
}

}  // namespace

TEST_SUITE("collectives::reduce") {
  TEST_CASE("every dtype, op and source count matches the scalar reference bit for bit") {
    const dtrain_dtype_t dtypes[] = {DTRAIN_INT8,    DTRAIN_UINT8,    DTRAIN_INT32,   DTRAIN_INT64,  DTRAIN_FLOAT16,
                                     DTRAIN_BFLOAT16, DTRAIN_FLOAT32, DTRAIN_FLOAT64, DTRAIN_BOOL,   DTRAIN_INT16};
    const dtrain_op_t ops[] = {DTRAIN_SUM, DTRAIN_AVG, DTRAIN_PROD, DTRAIN_MIN,
                               DTRAIN_MAX, DTRAIN_BAND, DTRAIN_BOR, DTRAIN_BXOR};
    std::mt19937 rng(14);
    int combos = 0;
    for (auto dt : dtypes)
      for (auto op : ops) {
        if (!takes(dt, op)) continue;
        ++combos;
        for (int nsrc = 1; nsrc <= 3; ++nsrc)
          for (std::size_t count : {std::size_t{1}, std::size_t{7}, std::size_t{33}, std::size_t{1023},
                                    std::size_t{1024}, std::size_t{2049}}) {
            CAPTURE(dt);
            CAPTURE(op);
            CAPTURE(nsrc);
            CAPTURE(count);
            std::vector<std::vector<std::uint8_t>> src(static_cast<std::size_t>(nsrc));
            for (auto& s : src) fill(s, count, dt, rng);
            std::vector<const void*> ptrs;
            for (auto& s : src) ptrs.push_back(s.data());
            const auto want = reference(src, count, dt, op);
            std::vector<std::uint8_t> out(want.size(), 0xa5), out2(want.size(), 0x5a);
            reduce_n(ptrs.data(), nsrc, out.data(), out2.data(), count, dt, op, nsrc);
            CHECK(same_bits_or_both_nan(out, want, dt));
            CHECK(out2 == out);
            // In place: the first source is also the output.
            auto first = src[0];
            ptrs[0] = first.data();
            reduce_n(ptrs.data(), nsrc, first.data(), nullptr, count, dt, op, nsrc);
            CHECK(first == out);
          }
      }
    CHECK(combos == 10 * 5 - 1 + 6 * 3);  // every dtype x the five arithmetic ops but bool avg, + bitwise
  }

  TEST_CASE("scale_n: each element times the scale in the dtype's arithmetic") {
    std::mt19937 rng(3);
    for (auto dt : {DTRAIN_FLOAT16, DTRAIN_BFLOAT16, DTRAIN_FLOAT32, DTRAIN_FLOAT64})
      for (std::size_t count : {std::size_t{1}, std::size_t{31}, std::size_t{4097}}) {
        CAPTURE(dt);
        CAPTURE(count);
        std::vector<std::uint8_t> src;
        fill(src, count, dt, rng);
        std::vector<std::uint8_t> out(src.size()), want(src.size());
        const double scale = 0.3;
        for (std::size_t i = 0; i < count; ++i) {
          if (dt == DTRAIN_FLOAT64) {
            double v;
            std::memcpy(&v, src.data() + i * 8, 8);
            v *= scale;
            std::memcpy(want.data() + i * 8, &v, 8);
          } else if (dt == DTRAIN_FLOAT32) {
            float v;
            std::memcpy(&v, src.data() + i * 4, 4);
            v *= static_cast<float>(scale);
            std::memcpy(want.data() + i * 4, &v, 4);
          } else {
            std::uint16_t h;
            std::memcpy(&h, src.data() + i * 2, 2);
            const float f = (dt == DTRAIN_FLOAT16 ? half_to_float(h) : bf16_to_float(h)) * static_cast<float>(scale);
            h = dt == DTRAIN_FLOAT16 ? float_to_half(f) : float_to_bf16(f);
            std::memcpy(want.data() + i * 2, &h, 2);
          }
        }
        scale_n(src.data(), out.data(), count, dt, scale);
        CHECK(same_bits_or_both_nan(out, want, dt));
        scale_n(src.data(), src.data(), count, dt, scale);  // in place
        CHECK(same_bits_or_both_nan(src, want, dt));
      }
  }
}
