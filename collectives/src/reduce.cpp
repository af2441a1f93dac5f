// Reduction kernels. Written as plain loops over fixed-size tiles so GCC/Clang auto-vectorise them at
// -O3 (this file is compiled with -O3); the accumulator tile lives on the stack, which also makes
// in-place reduction safe (each tile is read from every source before it is written). The fp16 and
// bf16 conversions are branch-free (every case computed, then selected) so that their loops
// vectorise too; a branch in them kept those loops scalar, about 10x slower than float32.
#include "reduce.hpp"

#include <algorithm>
#include <bit>
#include <type_traits>

#include "dtrain/common/errors.hpp"

namespace dtrain::coll {
namespace {

// The conversions, always inlined into the tile loops (a call in a loop keeps it scalar).
[[gnu::always_inline]] inline float h2f(std::uint16_t h) {
  // Branch-light conversion (F. Giesen): shift exponent/mantissa, rescale by 2^112, fix Inf/NaN.
  constexpr float magic = std::bit_cast<float>(std::uint32_t{(254u - 15u) << 23});
  constexpr float was_infnan = std::bit_cast<float>(std::uint32_t{(127u + 16u) << 23});
  std::uint32_t u = (static_cast<std::uint32_t>(h) & 0x7fffu) << 13;
  const float f = std::bit_cast<float>(u) * magic;
  u = std::bit_cast<std::uint32_t>(f) | (f >= was_infnan ? 255u << 23 : 0u);
  u |= (static_cast<std::uint32_t>(h) & 0x8000u) << 16;
  return std::bit_cast<float>(u);
}

[[gnu::always_inline]] inline std::uint16_t f2h(float in) {
  // Round to nearest even, subnormals and Inf/NaN handled (F. Giesen's float_to_half_fast3_rtne).
  constexpr std::uint32_t f32infty = 255u << 23;
  constexpr std::uint32_t f16max = (127u + 16u) << 23;
  constexpr std::uint32_t denorm_magic_u = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  std::uint32_t u = std::bit_cast<std::uint32_t>(in);
  std::uint32_t sign = u & 0x80000000u;
  u ^= sign;
  const std::uint32_t inf_nan = u > f32infty ? 0x7e00u : 0x7c00u;
  const std::uint32_t subnormal =
      std::bit_cast<std::uint32_t>(std::bit_cast<float>(u) + std::bit_cast<float>(denorm_magic_u)) - denorm_magic_u;
  const std::uint32_t normal = (u + (static_cast<std::uint32_t>(15 - 127) << 23) + 0xfffu + ((u >> 13) & 1u)) >> 13;
  const std::uint32_t o = u >= f16max ? inf_nan : (u < (113u << 23) ? subnormal : normal);
  return static_cast<std::uint16_t>(o | (sign >> 16));
}

[[gnu::always_inline]] inline float b2f(std::uint16_t h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

[[gnu::always_inline]] inline std::uint16_t f2b(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t quiet_nan = (u >> 16) | 0x40u;
  const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return static_cast<std::uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

}  // namespace

float half_to_float(std::uint16_t h) { return h2f(h); }
std::uint16_t float_to_half(float f) { return f2h(f); }
float bf16_to_float(std::uint16_t h) { return b2f(h); }
std::uint16_t float_to_bf16(float f) { return f2b(f); }

namespace {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DTRAIN_REDUCE_AVX2 1
#endif

namespace generic {
#include "reduce_kernels.inc"
}  // namespace generic

#if DTRAIN_REDUCE_AVX2
// The same kernels compiled for AVX2 (8 floats a vector, unsigned compares and 32->16-bit packs in
// one instruction: the fp16/bf16 conversions gain most), chosen at run time where the CPU has it.
#pragma GCC push_options
#pragma GCC target("avx2")
namespace avx2 {
#include "reduce_kernels.inc"
}  // namespace avx2
#pragma GCC pop_options
#endif

#if DTRAIN_REDUCE_AVX2
bool use_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}
#endif

}  // namespace

void reduce_n(const void* const* srcs, int nsrc, void* out, void* out2, std::size_t count, dtrain_dtype_t dtype,
              dtrain_op_t op, int avg_divisor) {
  if (count == 0) return;
  DTRAIN_CHECK(nsrc >= 1, "reduce_n with {} sources", nsrc);
#if DTRAIN_REDUCE_AVX2
  if (use_avx2()) return avx2::reduce_any(srcs, nsrc, out, out2, count, dtype, op, avg_divisor);
#endif
  generic::reduce_any(srcs, nsrc, out, out2, count, dtype, op, avg_divisor);
}

void divide_in_place(void* buf, std::size_t count, dtrain_dtype_t dtype, int divisor) {
  if (divisor <= 1) return;
#if DTRAIN_REDUCE_AVX2
  if (use_avx2()) return avx2::divide_any(buf, count, dtype, divisor);
#endif
  generic::divide_any(buf, count, dtype, divisor);
}

void scale_n(const void* src, void* dst, std::size_t count, dtrain_dtype_t dtype, double scale) {
  if (count == 0) return;
#if DTRAIN_REDUCE_AVX2
  if (use_avx2()) return avx2::scale_any(src, dst, count, dtype, scale);
#endif
  generic::scale_any(src, dst, count, dtype, scale);
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
