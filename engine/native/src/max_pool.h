// max_pool.h: 2-D max pooling with a one-byte argmax (kernels.h "pool"), for
// ResNet's stem. PyTorch keeps an int64 input index per output element (8
// bytes, 411 MB for ResNet-50's stem at micro-batch 256) and its backward
// scatters through it; here the index is the place in the window and the
// backward gathers.
#pragma once

#include <torch/torch.h>

namespace cs {

// torch::max_pool2d(x, k, s, p) (no dilation, floor mode); with the kernel
// (max_pool_fused) the same values and gradients.
torch::Tensor max_pool(const torch::Tensor& x, int64_t k, int64_t s, int64_t p);

// Whether max_pool runs the kernels: the "pool" kernel switched on, x a CUDA
// bf16 or fp16 channels_last 4-D tensor with a channel count a multiple of 8.
bool max_pool_fused(const torch::Tensor& x, int64_t k, int64_t s, int64_t p);

}  // namespace cs
