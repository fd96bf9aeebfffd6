// precision.h: fp32 / tf32 / bf16 / fp16 as the trainer applies them.
//   fp32: fp32 math, TF32 off for matmuls and convolutions.
//   tf32: fp32 storage, TF32 tensor-core math for matmuls and convolutions (CUDA).
//   bf16: autocast to bfloat16 in the forward pass (CUDA and CPU).
//   fp16: autocast to float16 + dynamic loss scaling (LossScaler).
//   fp8: bf16 autocast, and the transformer blocks' linear layers in FP8
//        (fp8_linear.h; CUDA with compute capability ≥ 8.9 only).
#pragma once

#include <torch/torch.h>

#include <memory>

#include "config.h"
#include "fp8_linear.h"

namespace cs {

// Refuses a precision the device and libtorch cannot run (UnsupportedError).
void check_precision(Precision p, const torch::Device& d);

// Sets the process-wide TF32 switches for p.
void apply_math_mode(Precision p);

// Autocast for the forward pass of one micro-batch: enabled in the constructor
// (bf16/fp16/fp8 only; fp8 autocasts to bf16 and switches FP8 on for the linear
// layers, fp8::Scope), disabled and its weight-cast cache cleared in the destructor.
// Autocast state is thread-local, so a scope never outlives one ABI call.
class AutocastScope {
 public:
  AutocastScope(const torch::Device& d, Precision p);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  c10::DeviceType dev_;
  bool on_ = false, prev_ = false;
  at::ScalarType prev_dtype_;
  std::unique_ptr<fp8::Scope> fp8_;
};

// LayerNorm over the last dimension for transformer blocks. Under CUDA autocast
// PyTorch runs layer_norm in fp32 and returns fp32, so the residual stream and
// every LayerNorm output stay fp32 and each following matmul casts them back.
// Here the input and the affine parameters go to the autocast dtype once and
// the kernel (which accumulates in fp32) writes that dtype: half the memory
// traffic of the normalisation and one cast kernel fewer (Megatron's choice).
// Elsewhere (no CUDA autocast) it is torch::layer_norm.
torch::Tensor block_layer_norm(const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& bias, double eps);

// Dynamic loss scaling with GradScaler's semantics (initial scale 65536, x2 after
// 2000 consecutive finite steps, x0.5 and the step skipped on inf/nan), kept in
// device tensors so that nothing syncs the host and the update is graph-capturable.
class LossScaler {
 public:
  explicit LossScaler(const torch::Device& d);
  const torch::Tensor& scale() const { return scale_; }  // 0-d float32
  // After the optimizer: found_inf is 0-d float32, 1 when the step was skipped.
  void update(const torch::Tensor& found_inf);

  static constexpr double kInit = 65536.0, kGrowth = 2.0, kBackoff = 0.5;
  static constexpr int kInterval = 2000;

 private:
  torch::Tensor scale_, good_steps_;
};

}  // namespace cs
