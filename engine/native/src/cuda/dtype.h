// dtype.h: the element types the engine's kernels read and write, shared by
// the CUDA launchers (kernels_cuda.h) and their host versions (host_kernels.h);
// no CUDA headers here.
#pragma once

#include <cstdint>

namespace cs {
namespace kern {

enum class DType { F32 = 0, BF16 = 1, F16 = 2 };

// The activation after a linear layer whose backward the "lin" kernel fuses:
// none, GELU with the tanh approximation (GPT-2), exact GELU with erf (BERT).
enum class Act { None = 0, GeluTanh = 1, GeluErf = 2 };

// One tensor of the "cast" kernel: n fp32 values at src to write at dst in
// the kernel's target dtype.
struct CastJob {
  const float* src;
  void* dst;
  int64_t n;
};

// One tensor of the "adam" kernel: n fp32 values of a parameter, its gradient
// and its two AdamW moments, all laid out alike; weight_decay is its group's.
struct AdamwJob {
  float* param;
  const float* grad;
  float* exp_avg;
  float* exp_avg_sq;
  int64_t n;
  double weight_decay;
};

// The AdamW hyper-parameters every tensor of an "adam" launch shares.
struct AdamwHyper {
  double lr, beta1, beta2, eps;
};

}  // namespace kern
}  // namespace cs
