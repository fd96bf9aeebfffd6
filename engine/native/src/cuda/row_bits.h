// row_bits.h: one element of RowRandom's draws (row_random.h) as scalar code,
// shared by the "rand" kernel (cuda/row_random.cu) and its host version
// (host_kernels.cpp). The same 32-bit arithmetic as row_random.cpp's tensor
// ops (lowbias32 on uint32 where those hold 32-bit values in int64), and the
// same float operations in the same order, each product rounded on its own
// (__fmul_rn on the device: never merged into a fused multiply-add, as the
// tensor ops' products, stored between kernels, are not).
#pragma once

#include <math.h>

#include <cstdint>

#include "dtype.h"

#if defined(__CUDACC__)
#define CS_ROW_HD __host__ __device__ __forceinline__
#else
#define CS_ROW_HD inline
#endif

namespace cs {
namespace kern {

// a * b rounded to float, never fused with a later add.
CS_ROW_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

// lowbias32 (Chris Wellons' hash-prospector).
CS_ROW_HD uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

// A row's key: mix(mix(row mod 2^32) ^ key).
CS_ROW_HD uint32_t row_key(uint32_t key, int64_t row) { return mix32(mix32(uint32_t(row)) ^ key); }

// Element e's 32 bits in the row of key rk: two rounds over (row key ^ mix(e)).
CS_ROW_HD uint32_t row_bits(uint32_t rk, int64_t e) {
  return mix32(mix32(rk ^ mix32(uint32_t(e))) ^ 0x68e31da4U);
}

// 24 bits as a float in [0, 1): (b >> 8) converted exactly, times 2^-24 (exact).
CS_ROW_HD float row_uniform(uint32_t b) { return mul_rn(float(b >> 8), 1.0f / 16777216.0f); }

// Box-Muller from the bits of element j (u1, in (0, 1]) and of element half + j
// (u2, in [0, 1)): r = sqrt(-2 log u1), theta = u2 * float(2 pi); the element
// j of the row is r cos theta, the element half + j is r sin theta. Each
// operation rounds as row_random.cpp's tensor op does: log_, mul_(-2), sqrt_,
// mul_(float(2 pi)), cos, sin, r * cos, r * sin.
CS_ROW_HD void row_normal(uint32_t b1, uint32_t b2, float& c, float& s) {
  const float u1 = mul_rn(float((b1 >> 8) + 1), 1.0f / 16777216.0f);
  const float u2 = mul_rn(float(b2 >> 8), 1.0f / 16777216.0f);
  const float r = sqrtf(mul_rn(logf(u1), -2.0f));
  const float theta = mul_rn(u2, float(2.0 * 3.14159265358979323846));
  c = mul_rn(r, cosf(theta));
  s = mul_rn(r, sinf(theta));
}

}  // namespace kern
}  // namespace cs
