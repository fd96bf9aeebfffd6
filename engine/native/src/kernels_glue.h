// kernels_glue.h: what the C++ side of the engine's kernels shares: where a
// kernel runs (runs_here), dtype mapping, and in builds with CS_WITH_KERNELS the
// current stream and the launch check. Each op's .cpp calls its CUDA launcher
// (cuda/kernels_cuda.h) for CUDA tensors and its host version (host_kernels.h)
// for CPU tensors, which only the tests reach (kernels::set_host_for_tests).
#pragma once

#include <torch/torch.h>

#include <stdexcept>
#include <string>

#include "cuda/dtype.h"
#include "host_kernels.h"
#include "kernels.h"

#ifdef CS_WITH_KERNELS
#include <c10/cuda/CUDAStream.h>

#include "cuda/kernels_cuda.h"
#endif

namespace cs {
namespace glue {

inline bool has_dtype(at::ScalarType t) {
  return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf;
}

inline kern::DType dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return kern::DType::F32;
    case at::kBFloat16:
      return kern::DType::BF16;
    case at::kHalf:
      return kern::DType::F16;
    default:
      throw std::invalid_argument(std::string("engine kernels: no ") + c10::toString(t) +
                                  " variant");
  }
}

// Whether a kernel can run where t lives: a CUDA tensor in a build with the
// CUDA kernels, a CPU tensor under kernels::set_host_for_tests.
inline bool runs_here(const torch::Tensor& t) {
#ifdef CS_WITH_KERNELS
  if (t.is_cuda()) return true;
#endif
  return t.is_cpu() && kernels::host_for_tests();
}

#ifdef CS_WITH_KERNELS
inline cudaStream_t stream() { return c10::cuda::getCurrentCUDAStream().stream(); }

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e) +
                             " (CASESTUDY_KERNELS=native runs without the engine's kernels)");
}
#endif

// CS_KERNEL(on, what, fn, args...): kernel fn on the device of tensor on: the
// CUDA launcher cuda::fn(args..., stream) with its error checked, or the host
// version host::fn(args...) for a CPU tensor.
#ifdef CS_WITH_KERNELS
#define CS_KERNEL(on, what, fn, ...)                                          \
  do {                                                                        \
    if ((on).is_cuda())                                                       \
      ::cs::glue::check(::cs::cuda::fn(__VA_ARGS__, ::cs::glue::stream()), what); \
    else                                                                      \
      ::cs::host::fn(__VA_ARGS__);                                            \
  } while (0)
#else
#define CS_KERNEL(on, what, fn, ...)                                       \
  do {                                                                     \
    TORCH_CHECK(!(on).is_cuda(), what, ": this build has no CUDA kernels"); \
    ::cs::host::fn(__VA_ARGS__);                                           \
  } while (0)
#endif

// CS_KERNEL_FACT(on, fn, args...): a launcher's fact (scratch sizes, supported
// shapes) for the device of tensor on.
#ifdef CS_WITH_KERNELS
#define CS_KERNEL_FACT(on, fn, ...) \
  ((on).is_cuda() ? ::cs::cuda::fn(__VA_ARGS__) : ::cs::host::fn(__VA_ARGS__))
#else
#define CS_KERNEL_FACT(on, fn, ...) ::cs::host::fn(__VA_ARGS__)
#endif

}  // namespace glue
}  // namespace cs
