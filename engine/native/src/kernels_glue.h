// kernels_glue.h: what the C++ side of the engine's CUDA kernels shares (only
// in builds with CS_WITH_KERNELS): dtype mapping, the current stream, errors.
#pragma once

#ifdef CS_WITH_KERNELS
#include <c10/cuda/CUDAStream.h>
#include <torch/torch.h>

#include <stdexcept>
#include <string>

#include "cuda/kernels_cuda.h"

namespace cs {
namespace glue {

inline bool has_dtype(at::ScalarType t) {
  return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf;
}

inline cuda::DType dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return cuda::DType::F32;
    case at::kBFloat16:
      return cuda::DType::BF16;
    case at::kHalf:
      return cuda::DType::F16;
    default:
      throw std::invalid_argument(std::string("engine CUDA kernels: no ") + c10::toString(t) +
                                  " variant");
  }
}

inline cudaStream_t stream() { return c10::cuda::getCurrentCUDAStream().stream(); }

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e) +
                             " (CASESTUDY_KERNELS=native runs without the engine's kernels)");
}

}  // namespace glue
}  // namespace cs
#endif
