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
    const float t = tanhf(kBeta * (z + kKappa * z2 * z));
    return 0.5f * (1.f + t) + 0.5f * z * (1.f - t * t) * kBeta * (1.f + 3.f * kKappa * z2);
  }
  if (act == Act::GeluErf) {
    const float kAlpha = 0.7071067811865476f;  // 1 / sqrt(2)
    const float kBeta = 0.3989422804014327f;   // 1 / sqrt(2 pi)
    return 0.5f * (1.f + erff(z * kAlpha)) + z * kBeta * expf(-0.5f * z * z);
  }
  return 1.f;
}

}  // namespace kern
}  // namespace cs
