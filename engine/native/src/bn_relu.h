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

// Whether batch_norm_act runs the kernels: the "bn" kernel switched on, m in
// training mode with running statistics and a momentum, x a CUDA bf16 or
// fp16 channels_last tensor with a channel count the kernels take, the
// residual alike.
bool batch_norm_act_fused(const torch::nn::BatchNorm2dImpl& m, const torch::Tensor& x,
                          const torch::Tensor& residual);

}  // namespace cs
