// precision.cpp: math modes, autocast scopes and the dynamic loss scaler.
#include "precision.h"

#include <cstdlib>
#include <initializer_list>
#include <string>

#include "compat.h"

namespace cs {

namespace {

// The value of environment variable name, "" when unset; ConfigError when it is
// set to something outside choices.
std::string env_choice(const char* name, std::initializer_list<const char*> choices) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return "";
  std::string list;
  for (const char* c : choices) {
    if (std::string(v) == c) return v;
    list += (list.empty() ? "" : " or ") + std::string(c);
  }
  throw ConfigError("environment variable " + std::string(name) + " must be " + list + ", got \"" +
                    v + "\": unset it for the default");
}

}  // namespace

void check_precision(Precision p, const torch::Device& d) {
  if (p == Precision::FP8) {
    auto why = fp8::unsupported_reason(d);
    if (!why.empty()) throw UnsupportedError(why);
  }
  if (p == Precision::FP16 && d.is_cpu() && !CS_HAS_CPU_FP16_AUTOCAST)
    throw UnsupportedError("precision fp16 on CPU needs libtorch ≥ 2.1 (CPU autocast in " +
                           compat::torch_version() +
                           " only casts to bf16); use bf16 or a CUDA device");
}

void apply_math_mode(Precision p) {
  const bool tf32 = p == Precision::TF32;
  at::globalContext().setAllowTF32CuBLAS(tf32);
  at::globalContext().setAllowTF32CuDNN(tf32);
  // Diagnostics of bf16's deviation from fp32 (TestGPUBF16Diagnose; docs/engine.md):
  // CASESTUDY_BF16_REDUCED_REDUCTION=0 forbids cuBLAS's reduced-precision (bf16)
  // reductions in bf16 GEMMs (split-K's partial sums), PyTorch's default being to
  // allow them; CASESTUDY_ATTENTION=math runs attention as matmul, softmax,
  // matmul instead of SDPA's fused kernels. Read at every trainer's init.
  const bool reduced = env_choice("CASESTUDY_BF16_REDUCED_REDUCTION", {"0", "1"}) != "0";
#if CS_TORCH_AT_LEAST(2, 1)
  at::globalContext().setAllowBF16ReductionCuBLAS(reduced);
#else
  (void)reduced;  // 1.13 has no such switch (and CPU GEMMs no split-K in bf16)
#endif
  compat::attention_math() = env_choice("CASESTUDY_ATTENTION", {"sdpa", "math"}) == "math";
}

AutocastScope::AutocastScope(const torch::Device& d, Precision p) : dev_(d.type()) {
  if (p != Precision::BF16 && p != Precision::FP16 && p != Precision::FP8) return;
  on_ = true;
  prev_ = compat::autocast_enabled(dev_);
  prev_dtype_ = compat::autocast_dtype(dev_);
  compat::set_autocast(dev_, true, p == Precision::FP16 ? at::kHalf : at::kBFloat16);
  if (p == Precision::FP8) fp8_ = std::make_unique<fp8::Scope>();
}

AutocastScope::~AutocastScope() {
  fp8_.reset();
  if (!on_) return;
  compat::set_autocast(dev_, prev_, prev_dtype_);
  if (!prev_) at::autocast::clear_cache();
}

torch::Tensor block_layer_norm(const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& bias, double eps) {
  const std::vector<int64_t> shape{x.size(-1)};
  if (!x.is_cuda() || !compat::autocast_enabled(c10::DeviceType::CUDA))
    return torch::layer_norm(x, shape, weight, bias, eps);
  const auto dt = compat::autocast_dtype(c10::DeviceType::CUDA);
  // Past autocast's fp32 rule for layer_norm; autograd still records the casts.
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCUDA);
  return torch::layer_norm(x.to(dt), shape, weight.to(dt), bias.to(dt), eps);
}

LossScaler::LossScaler(const torch::Device& d) {
  auto opt = torch::TensorOptions().dtype(torch::kFloat32).device(d);
  scale_ = torch::full({}, kInit, opt);
  good_steps_ = torch::zeros({}, opt);
}

void LossScaler::update(const torch::Tensor& found_inf) {
  torch::NoGradGuard ng;
  auto ok = 1.0 - found_inf;
  good_steps_.add_(1.0).mul_(ok);  // reset on a skipped step
  auto grow = good_steps_.ge(double(kInterval)).to(torch::kFloat32);
  scale_.mul_(1.0 - (1.0 - kBackoff) * found_inf).mul_(1.0 + (kGrowth - 1.0) * grow);
  good_steps_.mul_(1.0 - grow);
}

}  // namespace cs
