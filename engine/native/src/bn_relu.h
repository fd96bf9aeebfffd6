// bn_relu.h: training-mode batch norm, the residual add after it and the ReLU
// in one op over channels_last activations (forward three kernels, backward
// three: kernels.h "bn"), for ResNet. PyTorch runs bf16 batch norm in its own
// kernels (fp16 in cuDNN), then the add and the ReLU apart: on the H200 batch
// norm was 45% of a ResNet-50 step and the elementwise ops another 18%
// (docs/perf.md).
#pragma once

#include <torch/torch.h>

#include <utility>

namespace cs {

// relu?(m(x) + residual) (residual undefined: none). With the kernel
// (batch_norm_act_fused) the batch statistics, the running statistics'
// update and num_batches_tracked are those of m's forward; otherwise it is
// m(x), add_(residual), relu_() as libtorch runs them.
torch::Tensor batch_norm_act(torch::nn::BatchNorm2dImpl& m, const torch::Tensor& x,
                             const torch::Tensor& residual, bool relu);

// batch_norm_act's output as two tensors of the same values, for an output
// used twice (a ResNet block's: the next block's first convolution and its
// residual). With the kernel ("bn" and "res" switched on) their gradients
// reach the backward apart and are added there as they are read, instead of
// by autograd in an add kernel of its own; otherwise both are the one output.
std::pair<torch::Tensor, torch::Tensor> batch_norm_act_twin(torch::nn::BatchNorm2dImpl& m,
                                                            const torch::Tensor& x,
                                                            const torch::Tensor& residual,
                                                            bool relu);

// batch_norm_act(_twin) with the batch statistics of x given as sums (fp32
// CUDA [2, C]: the per-channel sum and sum of squares, e.g. from a fused
// convolution's GenStats, resnet_fusion.h): no statistics pass, the same
// finalize (from the sums), apply and backward kernels otherwise. CUDA
// only, batch_norm_act_fused must hold, not under activation checkpointing.
std::pair<torch::Tensor, torch::Tensor> batch_norm_act_from_sums(torch::nn::BatchNorm2dImpl& m,
                                                                 const torch::Tensor& x,
                                                                 const torch::Tensor& sums,
                                                                 const torch::Tensor& residual,
                                                                 bool relu, bool twin);

// The finalize from sums, the one both batch_norm_act_from_sums and
// resnet.fusion's bn2 (resnet_fusion.cpp, whose apply runs in conv3's
// prologue) run: cuda::bn_sums_finalize on sums (fp32 CUDA [2, C], the
// per-channel sum and sum of squares of x over M rows) with m's affine
// parameters, eps and momentum, updating m's running statistics. Returns
// the batch mean and invstd (fp32 [C], for the backward kernels), the scale
// and shift (fp32 [2 C]) and, with fp16_coef, the same rounded to fp16
// ([2, C], a fused convolution's scale-bias prologue takes fp16). what names
// the caller in a kernel's error. CUDA builds with the kernels only.
struct BnFromSums {
  torch::Tensor mean, invstd, coef, coef16;
};
BnFromSums batch_norm_finalize_sums(const torch::Tensor& sums, const torch::Tensor& weight,
                                    const torch::Tensor& bias, torch::Tensor running_mean,
                                    torch::Tensor running_var, int64_t M, double eps,
                                    double momentum, bool fp16_coef, const char* what);

// Whether batch_norm_act runs the kernels: the "bn" kernel switched on, m in
// training mode with running statistics and a momentum, x a CUDA bf16 or
// fp16 channels_last tensor with a channel count the kernels take, the
// residual alike.
bool batch_norm_act_fused(const torch::nn::BatchNorm2dImpl& m, const torch::Tensor& x,
                          const torch::Tensor& residual);

}  // namespace cs
