// batchnorm.h: training-mode BatchNorm2d, with cuDNN for bf16 on CUDA.
//
// PyTorch sends bf16 batch norm to its own CUDA kernels and only fp16/fp32 to
// cuDNN (the backend choice in ATen's Normalization.cpp). On the H200 those
// kernels were 45% of a ResNet-50 step, in the engine and in torchvision
// alike (docs/perf.md). cuDNN's batch norm (NHWC persistent kernels for
// channels_last) takes bf16 too, so for bf16 on CUDA the engine calls
// at::cudnn_batch_norm directly, once a probe (forward and backward on a small
// batch, against the native kernels) has shown that this cuDNN accepts it.
// CASESTUDY_BATCHNORM=native turns this off (for comparisons).
#pragma once

#include <torch/torch.h>

#include <string>

namespace cs {

// m(x), through cuDNN when x is bf16 on CUDA, m is training and the probe passed.
torch::Tensor batch_norm(torch::nn::BatchNorm2dImpl& m, const torch::Tensor& x);

// Which kernels bf16 batch norm uses on device d: "cudnn" or "native" (runs
// the probe on first use; "native" for a CPU device).
std::string batchnorm_bf16_backend(const torch::Device& d);

}  // namespace cs
