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

#include <array>

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

// linear_act(x, weight, bias, Act::None) through the "lin" kernel's function
// (needs linear_act_fused and no fp8) whose backward returns no gradient for
// bias: for a caller whose own autograd node returns it
// (linear_add_layer_norm_twin, add_layer_norm.h).
torch::Tensor linear_bias_grad_elsewhere(const torch::Tensor& x, const torch::Tensor& weight,
                                         const torch::Tensor& bias);

// A transformer's qkv projection: x [B, T, in] times weight [3 d, in] plus
// bias [3 d], returned as q, k and v [B, heads, T, d / heads] (views of the
// projection as [B, T, 3, heads, d / heads]). With the "qkv" kernel
// (linear_qkv_fused) the backward writes the projection's output gradient
// from the three gradients and sums its bias gradient in the same pass; else
// linear_act and unbind, whose backward stacks the three and sums in a
// second pass.
std::array<torch::Tensor, 3> linear_qkv(const torch::Tensor& x, const torch::Tensor& weight,
                                        const torch::Tensor& bias, int64_t heads);

// Whether linear_qkv runs the "qkv" kernel: it and "lin" switched on
// (linear_act_fused), x 3-D, weight's rows a multiple of 3 heads.
bool linear_qkv_fused(const torch::Tensor& x, const torch::Tensor& weight, int64_t heads);

}  // namespace cs
