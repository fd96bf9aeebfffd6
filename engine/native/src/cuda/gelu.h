// gelu.h: the GELU's derivative, for the "lin" kernel (bias_act.cu) and its
// host version (host_kernels.cpp): PyTorch's gelu_backward formulas in fp32.
#pragma once

#include <math.h>

#include "dtype.h"

#if defined(__CUDACC__)
#define CS_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define CS_HOST_DEVICE inline
#endif

namespace cs {
namespace kern {

// d act(z) / dz for act GeluTanh (0.5 z (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3))))
// or GeluErf (0.5 z (1 + erf(z / sqrt 2))); 1 for None.
CS_HOST_DEVICE float act_grad(float z, Act act) {
  if (act == Act::GeluTanh) {
    const float kBeta = 0.7978845608028654f;  // sqrt(2 / pi)
    const float kKappa = 0.044715f;
    const float z2 = z * z;
    const float u = kBeta * (z + kKappa * z2 * z);
#if defined(__CUDA_ARCH__)
    // tanh u = 1 - 2 / (e^2u + 1) from the fast exponential: a few instructions
    // where tanhf takes dozens (the backward kernel is otherwise compute-bound),
    // within about 1e-7 of tanhf, far below the bf16/fp16 rounding of dz; e^2u
    // = inf gives 1, e^2u = 0 gives -1.
    const float t = 1.f - __fdividef(2.f, __expf(2.f * u) + 1.f);
#else
    const float t = tanhf(u);
#endif
    return 0.5f * (1.f + t) + 0.5f * z * (1.f - t * t) * kBeta * (1.f + 3.f * kKappa * z2);
  }
  if (act == Act::GeluErf) {
    const float kAlpha = 0.7071067811865476f;  // 1 / sqrt(2)
    const float kBeta = 0.3989422804014327f;   // 1 / sqrt(2 pi)
#if defined(__CUDA_ARCH__)
    const float e = __expf(-0.5f * z * z);  // the fast exponential, as for tanh above
#else
    const float e = expf(-0.5f * z * z);
#endif
    return 0.5f * (1.f + erff(z * kAlpha)) + z * kBeta * e;
  }
  return 1.f;
}

}  // namespace kern
}  // namespace cs
