// resnet_fusion.h: a ResNet bottleneck block with its batch norms folded into
// cuDNN's fused convolutions (knob resnet.fusion: cudnn; fp16, channels_last,
// CUDA; docs/resnet-fusion.md section 6). Forward:
//   conv1 (1x1) + GenStats            -> bn1's statistics as sums, no pass
//   bn1 finalize + apply + ReLU       (the engine's kernels, bn_relu.h)
//   conv2 (3x3) + GenStats            -> bn2's statistics
//   bn2 finalize, then conv3 (1x1) as the full ConvBNfprop: bn2's
//   scale-bias-ReLU in its prologue (bn2's activation never written) and bn3's
//   statistics in its epilogue
//   bn3 finalize + apply + residual + ReLU (the engine's kernels)
// Backward: the convolutions' data and weight gradients through ATen (cuDNN),
// bn2's activation recomputed by the engine's apply kernel for conv3's weight
// gradient, every batch norm's backward the engine's kernels as unfused. With
// CASESTUDY_RESNET_FUSION_WGRAD=on (not yet run on a GPU, so not the default:
// docs/resnet-fusion.md section 9): conv3's weight gradient through cuDNN's
// ConvBNwgrad (bn2's scale-bias-ReLU recomputed inside it from y2) and bn2's
// backward recomputing its ReLU mask from y2, so bn2's activation is never
// written; where cuDNN refuses the ConvBNwgrad graph, as without it.
#pragma once

#include <torch/torch.h>

#include <string>
#include <utility>

namespace cs {

// Refuses a value other than "" / "off" / "cudnn", and "cudnn" where it
// cannot run, naming resnet.fusion: ConfigError where the family is not
// resnet50, the device not cuda, the precision not fp16 or channels_last off;
// UnsupportedError under activation checkpointing (not implemented) and in a
// build without the fused path (cudnn_fusion_missing()).
void check_resnet_fusion(const std::string& fusion, const std::string& family,
                         const std::string& precision, bool channels_last,
                         const std::string& device, bool activation_checkpointing);

// The parts of one bottleneck block (resnet.cpp) the fused forward uses.
struct BottleneckParts {
  torch::Tensor w1, w2, w3;  // the convolutions' weights (fp32 masters; cast to fp16 here)
  torch::nn::BatchNorm2dImpl *bn1, *bn2, *bn3;
  int64_t stride;            // conv2's
};

// One block's fused forward and whether it is on: the first call with inputs
// it takes (CUDA fp16 channels_last, 16-byte aligned, training mode, channel
// counts the bn kernels take) builds the block's three cuDNN plans; where
// cuDNN refuses one, it says so once on stderr ("resnet.fusion: <name> runs
// unfused: <reason>") and the block stays unfused.
// CASESTUDY_RESNET_FUSION_WGRAD: "on": conv3's weight gradient through
// ConvBNwgrad; unset, "" or "off": the apply kernel's recompute (the default
// until "on" has run on a GPU); std::invalid_argument naming the variable
// otherwise.
bool resnet_fusion_wgrad_from_env();

class BottleneckFusion {
 public:
  explicit BottleneckFusion(std::string name);
  // Says on stderr, once, how many of its forwards ran unfused, if any did:
  // a block whose inputs the fused path does not take falls back silently
  // at each call (the bn kernel off, eval mode, another dtype or layout).
  ~BottleneckFusion();
  BottleneckFusion(const BottleneckFusion&) = delete;
  BottleneckFusion& operator=(const BottleneckFusion&) = delete;
  // The block's output twice (batch_norm_act_twin), or false where the fused
  // path does not run for these inputs (nothing ran then).
  bool forward(const BottleneckParts& p, const torch::Tensor& x, const torch::Tensor& identity,
               std::pair<torch::Tensor, torch::Tensor>* out);
  // Blocks of this process that cuDNN refused (the tests require none).
  static int64_t refused();
  // This process's fused block forwards, and its blocks alive: a test
  // asserts that every block of a fused model ran fused at every step.
  static int64_t fused_forwards();
  static int64_t live_blocks();
  // Blocks whose ConvBNwgrad graph cuDNN refused under
  // CASESTUDY_RESNET_FUSION_WGRAD=on (their backward as without it; the
  // tests require none).
  static int64_t wgrad_refused();
  // This process's backward passes of blocks whose conv3 weight gradient ran
  // through ConvBNwgrad (the tests count them).
  static int64_t fused_wgrads();

 private:
  std::string name_;
  int state_ = 0;  // 0: not tried, 1: fused, -1: cuDNN refused a graph
  bool wgrad_;     // conv3's weight gradient through ConvBNwgrad
  int64_t fused_ = 0, unfused_ = 0;  // this block's forwards
  // forward's work, counted by forward (CUDA builds with the fused path only).
  bool fused_forward(const BottleneckParts& p, const torch::Tensor& x, const torch::Tensor& identity,
                     std::pair<torch::Tensor, torch::Tensor>* out);
};

}  // namespace cs
