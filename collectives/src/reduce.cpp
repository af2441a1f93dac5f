// Reduction kernels. Written as plain loops over fixed-size tiles so GCC/Clang auto-vectorise them at
// -O3 (this file is compiled with -O3); the accumulator tile lives on the stack, which also makes
// in-place reduction safe (each tile is read from every source before it is written).
#include "reduce.hpp"

#include <algorithm>
#include <bit>
#include <type_traits>

#include "dtrain/common/errors.hpp"

namespace dtrain::coll {

float half_to_float(std::uint16_t h) {
  // Branch-light conversion (F. Giesen): shift exponent/mantissa, rescale by 2^112, fix Inf/NaN.
  constexpr float magic = std::bit_cast<float>(std::uint32_t{(254u - 15u) << 23});
  constexpr float was_infnan = std::bit_cast<float>(std::uint32_t{(127u + 16u) << 23});
  std::uint32_t u = (static_cast<std::uint32_t>(h) & 0x7fffu) << 13;
  float f = std::bit_cast<float>(u) * magic;
  u = std::bit_cast<std::uint32_t>(f);
  if (f >= was_infnan) u |= 255u << 23;
  u |= (static_cast<std::uint32_t>(h) & 0x8000u) << 16;
  return std::bit_cast<float>(u);
}

std::uint16_t float_to_half(float in) {
  // Round to nearest even, subnormals and Inf/NaN handled (F. Giesen's float_to_half_fast3_rtne).
  constexpr std::uint32_t f32infty = 255u << 23;
  constexpr std::uint32_t f16max = (127u + 16u) << 23;
  constexpr std::uint32_t denorm_magic_u = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  std::uint32_t u = std::bit_cast<std::uint32_t>(in);
  std::uint32_t sign = u & 0x80000000u;
  u ^= sign;
  std::uint32_t o;
  if (u >= f16max) {
    o = u > f32infty ? 0x7e00u : 0x7c00u;
  } else if (u < (113u << 23)) {
    float f = std::bit_cast<float>(u) + std::bit_cast<float>(denorm_magic_u);
    o = std::bit_cast<std::uint32_t>(f) - denorm_magic_u;
  } else {
    std::uint32_t mant_odd = (u >> 13) & 1u;
    u += (static_cast<std::uint32_t>(15 - 127) << 23) + 0xfffu;
    u += mant_odd;
    o = u >> 13;
  }
  return static_cast<std::uint16_t>(o | (sign >> 16));
}

float bf16_to_float(std::uint16_t h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }

std::uint16_t float_to_bf16(float f) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

namespace {

template <class T>
struct Native {
  using Elem = T;
  using Acc = T;
  static Acc load(T x) { return x; }
  static T store(Acc a) { return a; }
};
struct Half {
  using Elem = std::uint16_t;
  using Acc = float;
  static Acc load(Elem x) { return half_to_float(x); }
  static Elem store(Acc a) { return float_to_half(a); }
};
struct BFloat {
  using Elem = std::uint16_t;
  using Acc = float;
  static Acc load(Elem x) { return bf16_to_float(x); }
  static Elem store(Acc a) { return float_to_bf16(a); }
};

// Integer arithmetic wraps (two's complement) instead of overflowing.
template <class A>
A add(A a, A b) {
  if constexpr (std::is_floating_point_v<A>) {
    return a + b;
  } else if constexpr (sizeof(A) < sizeof(int)) {
    return static_cast<A>(a + b);
  } else {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(a) + static_cast<U>(b));
  }
}
template <class A>
A mul(A a, A b) {
  if constexpr (std::is_floating_point_v<A>) {
    return a * b;
  } else if constexpr (sizeof(A) < sizeof(int)) {
    return static_cast<A>(a * b);
  } else {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(a) * static_cast<U>(b));
  }
}
template <class A>
A divide(A a, int d) {
  if constexpr (std::is_floating_point_v<A>) {
    return a / static_cast<A>(d);
  } else {
    return static_cast<A>(a / static_cast<A>(d));
  }
}

struct OpSum {
  template <class A>
  static A f(A a, A b) { return add(a, b); }
};
struct OpProd {
  template <class A>
  static A f(A a, A b) { return mul(a, b); }
};
struct OpMin {
  template <class A>
  static A f(A a, A b) { return b < a ? b : a; }
};
struct OpMax {
  template <class A>
  static A f(A a, A b) { return a < b ? b : a; }
};

constexpr std::size_t kTile = 1024;

template <class Tr, class Op>
void reduce_tiles(const void* const* srcs_v, int nsrc, void* out_v, void* out2_v, std::size_t count, int div) {
  using E = typename Tr::Elem;
  using A = typename Tr::Acc;
  auto* out = static_cast<E*>(out_v);
  auto* out2 = static_cast<E*>(out2_v);
  alignas(64) A acc[kTile];
  for (std::size_t base = 0; base < count; base += kTile) {
    const std::size_t m = std::min(kTile, count - base);
    const E* s0 = static_cast<const E*>(srcs_v[0]) + base;
    for (std::size_t i = 0; i < m; ++i) acc[i] = Tr::load(s0[i]);
    for (int j = 1; j < nsrc; ++j) {
      const E* s = static_cast<const E*>(srcs_v[j]) + base;
      for (std::size_t i = 0; i < m; ++i) acc[i] = Op::f(acc[i], Tr::load(s[i]));
    }
    if (div > 1)
      for (std::size_t i = 0; i < m; ++i) acc[i] = divide(acc[i], div);
    E* o = out + base;
    for (std::size_t i = 0; i < m; ++i) o[i] = Tr::store(acc[i]);
    if (out2 != nullptr) {
      E* o2 = out2 + base;
      for (std::size_t i = 0; i < m; ++i) o2[i] = Tr::store(acc[i]);
    }
  }
}

template <class Tr>
void reduce_op(const void* const* srcs, int nsrc, void* out, void* out2, std::size_t count, dtrain_op_t op, int div) {
  switch (op) {
    case DTRAIN_SUM: return reduce_tiles<Tr, OpSum>(srcs, nsrc, out, out2, count, 1);
    case DTRAIN_AVG: return reduce_tiles<Tr, OpSum>(srcs, nsrc, out, out2, count, div);
    case DTRAIN_PROD: return reduce_tiles<Tr, OpProd>(srcs, nsrc, out, out2, count, 1);
    case DTRAIN_MIN: return reduce_tiles<Tr, OpMin>(srcs, nsrc, out, out2, count, 1);
    case DTRAIN_MAX: return reduce_tiles<Tr, OpMax>(srcs, nsrc, out, out2, count, 1);
  }
  DTRAIN_CHECK(false, "bad reduction op {}", static_cast<int>(op));
}

template <class Tr>
void divide_tiles(void* buf_v, std::size_t count, int div) {
  auto* buf = static_cast<typename Tr::Elem*>(buf_v);
  for (std::size_t i = 0; i < count; ++i) buf[i] = Tr::store(divide(Tr::load(buf[i]), div));
}

}  // namespace

void reduce_n(const void* const* srcs, int nsrc, void* out, void* out2, std::size_t count, dtrain_dtype_t dtype,
              dtrain_op_t op, int avg_divisor) {
  if (count == 0) return;
  DTRAIN_CHECK(nsrc >= 1, "reduce_n with {} sources", nsrc);
  switch (dtype) {
    case DTRAIN_INT8: return reduce_op<Native<std::int8_t>>(srcs, nsrc, out, out2, count, op, avg_divisor);
    case DTRAIN_UINT8: return reduce_op<Native<std::uint8_t>>(srcs, nsrc, out, out2, count, op, avg_divisor);
    case DTRAIN_INT32: return reduce_op<Native<std::int32_t>>(srcs, nsrc, out, out2, count, op, avg_divisor);
    case DTRAIN_INT64: return reduce_op<Native<std::int64_t>>(srcs, nsrc, out, out2, count, op, avg_divisor);
    case DTRAIN_FLOAT16: return reduce_op<Half>(srcs, nsrc, out, out2, count, op, avg_divisor);
    case DTRAIN_BFLOAT16: return reduce_op<BFloat>(srcs, nsrc, out, out2, count, op, avg_divisor);
    case DTRAIN_FLOAT32: return reduce_op<Native<float>>(srcs, nsrc, out, out2, count, op, avg_divisor);
    case DTRAIN_FLOAT64: return reduce_op<Native<double>>(srcs, nsrc, out, out2, count, op, avg_divisor);
  }
  DTRAIN_CHECK(false, "bad dtype {}", static_cast<int>(dtype));
}

void divide_in_place(void* buf, std::size_t count, dtrain_dtype_t dtype, int divisor) {
  if (divisor <= 1) return;
  switch (dtype) {
    case DTRAIN_INT8: return divide_tiles<Native<std::int8_t>>(buf, count, divisor);
    case DTRAIN_UINT8: return divide_tiles<Native<std::uint8_t>>(buf, count, divisor);
    case DTRAIN_INT32: return divide_tiles<Native<std::int32_t>>(buf, count, divisor);
    case DTRAIN_INT64: return divide_tiles<Native<std::int64_t>>(buf, count, divisor);
    case DTRAIN_FLOAT16: return divide_tiles<Half>(buf, count, divisor);
    case DTRAIN_BFLOAT16: return divide_tiles<BFloat>(buf, count, divisor);
    case DTRAIN_FLOAT32: return divide_tiles<Native<float>>(buf, count, divisor);
    case DTRAIN_FLOAT64: return divide_tiles<Native<double>>(buf, count, divisor);
  }
}

void widen_to_float(const void* src_v, float* dst, std::size_t count, dtrain_dtype_t dtype) {
  const auto* src = static_cast<const std::uint16_t*>(src_v);
  if (dtype == DTRAIN_FLOAT16) {
    for (std::size_t i = 0; i < count; ++i) dst[i] = half_to_float(src[i]);
  } else {
    for (std::size_t i = 0; i < count; ++i) dst[i] = bf16_to_float(src[i]);
  }
}

void narrow_from_float(const float* src, void* dst_v, std::size_t count, dtrain_dtype_t dtype) {
  auto* dst = static_cast<std::uint16_t*>(dst_v);
  if (dtype == DTRAIN_FLOAT16) {
    for (std::size_t i = 0; i < count; ++i) dst[i] = float_to_half(src[i]);
  } else {
    for (std::size_t i = 0; i < count; ++i) dst[i] = float_to_bf16(src[i]);
  }
}

}  // namespace dtrain::coll
