// ln_keep.h: which columns "lny"'s LayerNorm keeps r for (layer_norm.cu and
// its host version, host_kernels.cpp; the add_layer_norm suite's bound).
// "lny" recomputes x^ = (y - b) / w from the output y rounded to the output
// dtype (unit roundoff u: 2^-8 bf16, 2^-11 fp16): |dx^| <= u |y| / |w| <=
// u (|x^| + |b| / |w|) to first order. Where |w| >= |b| that is at most
// u (|x^| + 1), one more rounding of an x^ of unit size, as from r in the
// output dtype; where |w| < |b| it grows as |b| / |w| without bound (w = 0:
// y = b, x^ = 0 / 0 or +-inf, and x^ mgx and w x^ carry the NaN into every
// dx of the row and into dw). Below |w| = 2^-14 (fp16's smallest normal) y =
// w x^ + b may be subnormal in fp16, its rounding no longer relative: those
// columns too. A kept column's x^ is (r - mean) rstd from r as stored, as
// without "lny".
#pragma once

#include <math.h>

#ifndef CS_HOST_DEVICE
#if defined(__CUDACC__)
#define CS_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define CS_HOST_DEVICE inline
#endif
#endif

namespace cs {
namespace kern {

// Whether column (w, b) keeps r: not (|w| >= |b| and |w| >= 2^-14); a NaN w or
// b keeps it (fmaxf would drop a NaN b: compared one by one).
CS_HOST_DEVICE bool ln_keeps_r(float w, float b) {
  return !(fabsf(w) >= fabsf(b) && fabsf(w) >= 6.103515625e-05f);
}

}  // namespace kern
}  // namespace cs
