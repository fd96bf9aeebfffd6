// linear_act.h: a linear layer and the activation after it (none or GELU) as
// one autograd function whose backward sums the bias gradient in one pass over
// the output gradient, with the GELU's backward fused in before the sum
// (kernels.h "lin"), for the transformer blocks of GPT and BERT. Through
// PyTorch's autograd the same backward is the GELU's own kernel (read dy and
// z, write dz), a reduction of dz over the rows for the bias gradient in the
// autocast dtype, and a cast of that to fp32; here one kernel reads dy and z,
// writes dz and the fp32 bias gradient. The forward pass is unchanged
// (torch::linear, whose cuBLASLt epilogue adds the bias, then torch::gelu).
#pragma once

#include <torch/torch.h>

#include "cuda/dtype.h"

namespace cs {

using kern::Act;

// act(x weight^T + bias): x [..., in], weight [out, in], bias [out]; act None,
// GeluTanh (GPT-2's GELU) or GeluErf (BERT's). Under autocast the matmuls run
// in its dtype, as torch::linear would; with the kernel (linear_act_fused) the
// bias gradient is summed in fp32 from the output gradient as stored.
torch::Tensor linear_act(const torch::Tensor& x, const torch::Tensor& weight,
                         const torch::Tensor& bias, Act act);

// Whether linear_act runs the "lin" kernel for x and weight: the kernel
// switched on, autocast on for x's device in bf16 or fp16, weight on x's device.
bool linear_act_fused(const torch::Tensor& x, const torch::Tensor& weight);

}  // namespace cs
