// cudnn_fusion.h: cuDNN's ConvBNfprop (a convolution with an optional
// scale-bias-ReLU prologue on its input and GenStats, the per-channel sum and
// sum of squares of its output, in one kernel) for the engine's fused ResNet
// path (resnet_fusion.h, knob resnet.fusion: cudnn; docs/resnet-fusion.md).
// Compiled in only where CMake found cuDNN 9's backend headers (cudnn_graph.h)
// and the engine's CUDA kernels (CS_WITH_CUDNN_FUSION); elsewhere the knob is
// refused with cudnn_fusion_missing()'s reason.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

namespace cs {

// Whether this build has the fused path; "" if it has, else why not.
bool cudnn_fusion_built();
std::string cudnn_fusion_missing();

// One graph's shape: input [N, C, H, W], filter [K, C, R, R], stride,
// padding R / 2; prologue: relu(x * scale + bias) on the input. wgrad false:
// ConvBNfprop (the convolution and GenStats of its output); true:
// ConvBNwgrad (the convolution's weight gradient from its output's gradient).
struct FusedConvShape {
  int64_t N, C, H, W, K, R, stride;
  bool prologue;
  bool wgrad = false;
  int64_t Ho() const { return (H + 2 * (R / 2) - R) / stride + 1; }
  int64_t Wo() const { return (W + 2 * (R / 2) - R) / stride + 1; }
  bool operator<(const FusedConvShape& o) const;
  std::string str() const;
};

// Builds (once per shape and device, cached) the graph and its execution plan:
// heuristic mode A's first engine config that finalizes, else FALLBACK's.
// Throws std::runtime_error with cuDNN's reason when no engine takes the graph,
// and when called inside CUDA graph capture for a shape not yet built.
void fused_conv_prepare(const FusedConvShape& s, const torch::Device& device);

// y = conv(prologue(x), w) and sums [2, K] fp32 (sum, sum of squares of y over
// N Ho Wo), through the cached plan. x: CUDA fp16 channels_last [N, C, H, W];
// w fp16 channels_last [K, C, R, R]; scale_bias: fp16 [2, C] (scale, then
// bias) for a prologue, undefined without. Launches on the current stream;
// allocates only through torch's allocator (y, sums, the workspace).
std::pair<torch::Tensor, torch::Tensor> fused_conv_genstats(const torch::Tensor& x,
                                                            const torch::Tensor& w,
                                                            const torch::Tensor& scale_bias,
                                                            int64_t stride);

// dw = the weight gradient of y = conv(relu(x * scale + bias), w) from dy
// (cuDNN's ConvBNwgrad: the prologue recomputed inside the weight gradient's
// kernel, the activation never written), fp16 channels_last [K, C, R, R].
// x: as fused_conv_genstats; dy: CUDA fp16 channels_last [N, K, Ho, Wo];
// scale_bias: fp16 [2, C], as the forward's prologue took it. Through the
// cached plan of the shape with wgrad (fused_conv_prepare); on the current
// stream.
torch::Tensor fused_conv_wgrad(const torch::Tensor& x, const torch::Tensor& dy, const torch::Tensor& scale_bias,
                               int64_t R, int64_t stride);

// The cached plans, one line each ("<shape>: engine E, workspace B bytes,
// heuristic H"), for tests and diagnostics.
std::vector<std::string> fused_conv_plans();

}  // namespace cs
