#pragma once
// Vectorisable reduction kernels (compiled at -O3). Order is fixed: out[i] = ((s0[i] op s1[i]) op s2[i])
// ... op s(n-1)[i], evaluated left to right; float16/bfloat16 are widened to float32, reduced in
// float32 and rounded once (round to nearest even) when stored. bool reduces as or (sum, max, bor),
// and (prod, min, band) or xor (bxor); the bitwise ops take integer dtypes (the communicator refuses
// the other combinations).
#include <cstddef>
#include <cstdint>

#include "dtrain/collectives.h"

namespace dtrain::coll {

// Reduces nsrc sources into out (and out2 when not null); with avg_divisor > 1 the result is divided
// by it (integers truncate toward zero). out may alias any source.
void reduce_n(const void* const* srcs, int nsrc, void* out, void* out2, std::size_t count,
              dtrain_dtype_t dtype, dtrain_op_t op, int avg_divisor);

// dst[i] = src[i] * scale (floating dtypes; fp16/bf16 through float32, rounded once); dst may be src.
void scale_n(const void* src, void* dst, std::size_t count, dtrain_dtype_t dtype, double scale);

// buf[i] /= divisor in place (the final step of avg done elsewhere).
void divide_in_place(void* buf, std::size_t count, dtrain_dtype_t dtype, int divisor);

// float16/bfloat16 <-> float32 conversion of whole buffers.
void widen_to_float(const void* src, float* dst, std::size_t count, dtrain_dtype_t dtype);
void narrow_from_float(const float* src, void* dst, std::size_t count, dtrain_dtype_t dtype);

float half_to_float(std::uint16_t h);
std::uint16_t float_to_half(float f);
float bf16_to_float(std::uint16_t h);
std::uint16_t float_to_bf16(float f);

}  // namespace dtrain::coll
