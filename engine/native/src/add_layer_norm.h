// add_layer_norm.h: a residual add and the LayerNorm after it in one op
// (forward and backward one CUDA kernel each: kernels.h "ln"), for the
// transformer blocks of GPT and BERT.
#pragma once

#include <torch/torch.h>

#include <utility>

namespace cs {

struct AddNorm {
  torch::Tensor r;  // x + delta, in x's dtype (x's values, a view of x, when delta is undefined)
  torch::Tensor y;  // LayerNorm(r) over the last dimension, in the output dtype
};

// r = x + delta (rounded to x's dtype), y = (r - mean) / sqrt(var + eps) *
// weight + bias in dtype out, statistics in fp32 from r as stored. With the
// kernel (add_layer_norm_fused) weight and bias are read in fp32; otherwise
// (the portable path) r and the affine parameters are cast to out and
// torch::layer_norm runs, as block_layer_norm does.
AddNorm add_layer_norm(const torch::Tensor& x, const torch::Tensor& delta,
                       const torch::Tensor& weight, const torch::Tensor& bias, double eps,
                       at::ScalarType out);

// add_layer_norm's y as two tensors of the same values, for an output used
// twice (BERT's: the next matrix product and the next residual add). With the
// kernel ("ln" and "res" switched on) their gradients reach the backward
// apart and are added there as they are read, instead of by autograd in an
// add kernel of its own; otherwise both are the one y.
std::pair<torch::Tensor, torch::Tensor> add_layer_norm_twin(const torch::Tensor& x,
                                                            const torch::Tensor& delta,
                                                            const torch::Tensor& weight,
                                                            const torch::Tensor& bias, double eps,
                                                            at::ScalarType out);

// add_layer_norm_twin(x, linear_act(x_lin, lin_weight, lin_bias, Act::None),
// weight, bias, eps, out): BERT's projection, residual add and LayerNorm.
// With the kernels (linear_add_layer_norm_fused: "lnb") the linear layer's
// bias gradient is summed by the LayerNorm's backward kernel as it writes
// the projection's output gradient, not in a pass of the "lin" kernel over
// it; the values are the same (fp32 sums of the same bf16 gradient, in
// another order).
//
// add_layer_norm_twin and this never return r: with "lny" the forward kernel
// stores it only in the columns whose normalized values y does not give back
// (|w| < max(|b|, 2^-14): cuda/ln_keep.h, where the error bound is derived)
// and the backward recomputes the others from y, w and b ((y - b) / w: one
// more rounding, of y to the output dtype, than from r; Apex's and Megatron's
// "memory-efficient" LayerNorm, which divides by w in every column). r's
// buffer is still allocated whole: "lny" saves its writes, not its memory.
std::pair<torch::Tensor, torch::Tensor> linear_add_layer_norm_twin(
    const torch::Tensor& x, const torch::Tensor& x_lin, const torch::Tensor& lin_weight,
    const torch::Tensor& lin_bias, const torch::Tensor& weight, const torch::Tensor& bias,
    double eps, at::ScalarType out);

// Whether linear_add_layer_norm_twin sums the bias gradient in the LayerNorm's
// kernel: "lnb" on, the linear through the "lin" kernel (linear_act_fused, not
// fp8), and add_layer_norm_fused for x and the linear's output.
bool linear_add_layer_norm_fused(const torch::Tensor& x, const torch::Tensor& x_lin,
                                 const torch::Tensor& lin_weight, at::ScalarType out);

// Whether add_layer_norm runs the CUDA kernel for these arguments: the "ln"
// kernel switched on, CUDA tensors, out bf16 or fp16, x fp32 or out's dtype,
// delta x's or out's dtype, a row length the kernel takes.
bool add_layer_norm_fused(const torch::Tensor& x, const torch::Tensor& delta, at::ScalarType out);

}  // namespace cs
