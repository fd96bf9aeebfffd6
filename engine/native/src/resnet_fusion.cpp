// resnet_fusion.cpp: see resnet_fusion.h.
#include "resnet_fusion.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <tuple>

#include "bn_relu.h"
#include "cudnn_fusion.h"
#include "kernels.h"
#include "model.h"

#ifdef CS_WITH_CUDNN_FUSION
#include "kernels_glue.h"
#endif

namespace cs {

void check_resnet_fusion(const std::string& fusion, const std::string& family,
                         const std::string& precision, bool channels_last,
                         const std::string& device, bool activation_checkpointing) {
  if (fusion.empty() || fusion == "off") return;
  if (fusion != "cudnn")
    throw ConfigError("resnet.fusion: unknown value \"" + fusion + "\"; use off or cudnn");
  const std::string why = "resnet.fusion cudnn: ";
  if (family != "resnet50")
    throw ConfigError(why + "folds batch norm into ResNet-50's convolutions; family is " + family);
  if (device != "cuda")
    throw ConfigError(why + "runs cuDNN's fused convolutions on CUDA only; device is " + device);
  if (precision != "fp16")
    throw ConfigError(why + "cuDNN's ConvBNfprop takes fp16 only on the H100 (docs/resnet-fusion.md); "
                      "precision is " + precision + ": set precision fp16");
  if (!channels_last)
    throw ConfigError(why + "cuDNN's ConvBNfprop takes NHWC tensors only: set channels_last true");
  // Not implemented, or not in this build: unsupported (CS_ERR_UNSUPPORTED), not a bad value.
  if (activation_checkpointing)
    throw UnsupportedError(why + "does not run under activation checkpointing yet: set "
                           "activation_checkpointing false");
  if (!cudnn_fusion_built()) throw UnsupportedError(why + "not in this build: " + cudnn_fusion_missing());
}

namespace {
std::atomic<int64_t> g_refused{0}, g_fused{0}, g_live{0}, g_wgrad_refused{0}, g_wgrads{0};
}  // namespace

bool resnet_fusion_wgrad_from_env() {
  const char* v = std::getenv("CASESTUDY_RESNET_FUSION_WGRAD");
  const std::string s = v ? v : "";
  if (s == "on") return true;
  if (s.empty() || s == "off") return false;
  throw std::invalid_argument("CASESTUDY_RESNET_FUSION_WGRAD: \"" + s + "\" is not on or off (unset: off)");
}

BottleneckFusion::BottleneckFusion(std::string name)
    : name_(std::move(name)), wgrad_(resnet_fusion_wgrad_from_env()) {
  g_live++;
}

BottleneckFusion::~BottleneckFusion() {
  g_live--;
  if (unfused_ > 0)
    std::fprintf(stderr,
                 "resnet.fusion: %s ran unfused in %lld of %lld forwards (cuDNN refused it, or its inputs were "
                 "not what the fused path takes: the bn kernel off, eval mode, another dtype or layout)\n",
                 name_.c_str(), static_cast<long long>(unfused_), static_cast<long long>(unfused_ + fused_));
}

int64_t BottleneckFusion::refused() { return g_refused.load(); }
int64_t BottleneckFusion::fused_forwards() { return g_fused.load(); }
int64_t BottleneckFusion::live_blocks() { return g_live.load(); }
int64_t BottleneckFusion::wgrad_refused() { return g_wgrad_refused.load(); }
int64_t BottleneckFusion::fused_wgrads() { return g_wgrads.load(); }

#ifndef CS_WITH_CUDNN_FUSION

bool BottleneckFusion::forward(const BottleneckParts&, const torch::Tensor&, const torch::Tensor&,
                               std::pair<torch::Tensor, torch::Tensor>*) {
  return false;  // check_resnet_fusion refused the knob in this build
}

#else

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
constexpr auto kCL = at::MemoryFormat::ChannelsLast;

// The plain gradients of y = conv(x, w) (no bias, padding R / 2), through ATen;
// without need_dw x only gives the input's shape and type.
std::tuple<torch::Tensor, torch::Tensor> conv_grads(const torch::Tensor& dy, const torch::Tensor& x,
                                                    const torch::Tensor& w, int64_t stride, bool need_dx,
                                                    bool need_dw = true) {
  const int64_t pad = w.size(2) / 2;
  auto g = at::convolution_backward(dy.contiguous(kCL), x, w, at::OptionalIntArrayRef(), {stride, stride}, {pad, pad},
                                    {1, 1}, false, {0, 0}, 1, {need_dx, need_dw, false});
  return {std::get<0>(g), std::get<1>(g)};
}

// y, sums = conv(x, w) with GenStats (conv1, conv2); the sums carry no gradient:
// the batch norm's backward (bn_relu.h) accounts for the statistics.
struct ConvGenStats : torch::autograd::Function<ConvGenStats> {
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w,
                               int64_t stride) {
    auto [y, sums] = fused_conv_genstats(x, w, torch::Tensor(), stride);
    ctx->save_for_backward({x, w});
    ctx->saved_data["stride"] = stride;
    ctx->mark_non_differentiable({sums});
    return {y, sums};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    auto [dx, dw] = conv_grads(grads[0], saved[0], saved[1], ctx->saved_data["stride"].toInt(),
                               ctx->needs_input_grad(0));
    return {dx, dw, torch::Tensor()};
  }
};

// bn2 then conv3: bn2's finalize from its sums (running statistics updated),
// then y3, sums3 = ConvBNfprop(relu(y2 scale + shift), w3). Backward with
// fused_wgrad: conv3's weight gradient through ConvBNwgrad (bn2's activation
// recomputed inside cuDNN's kernel from y2 and the same fp16 scale and shift),
// its data gradient through ATen, bn2's backward kernels recomputing the
// ReLU's mask from y2 (bn_act_bwd_remask): bn2's activation never written.
// Without: bn2's activation and mask recomputed by the engine's apply kernel,
// conv3's plain gradients, bn2's backward kernels.
struct BnConvGenStats : torch::autograd::Function<BnConvGenStats> {
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& y2, const torch::Tensor& bn_w,
                               const torch::Tensor& bn_b, const torch::Tensor& sums2,
                               torch::Tensor running_mean, torch::Tensor running_var, double eps,
                               double momentum, const torch::Tensor& w3, bool fused_wgrad) {
    const int64_t M = y2.numel() / y2.size(1);
    auto fin = batch_norm_finalize_sums(sums2, bn_w, bn_b, running_mean, running_var, M, eps, momentum, true,
                                        "resnet.fusion: bn2 finalize");
    const auto &mean = fin.mean, &invstd = fin.invstd, &coef16 = fin.coef16;
    auto [y3, sums3] = fused_conv_genstats(y2, w3, coef16, 1);
    ctx->save_for_backward({y2, bn_w, mean, invstd, coef16, w3});
    ctx->saved_data["fused_wgrad"] = fused_wgrad;
    ctx->mark_non_differentiable({sums3});
    return {y3, sums3};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto s = ctx->get_saved_variables();
    const auto &y2 = s[0], &bn_w = s[1], &mean = s[2], &invstd = s[3], &coef16 = s[4], &w3 = s[5];
    const int64_t C = y2.size(1), M = y2.numel() / C;
    auto f32 = y2.options().dtype(torch::kFloat32);
    auto coef = coef16.to(torch::kFloat32).contiguous();
    const bool fused = ctx->saved_data["fused_wgrad"].toBool();
    torch::Tensor dw3, da2, mask;
    if (fused) {  // conv3's weight gradient from y2 inside cuDNN; bn2's mask recomputed below
      auto dy3 = grads[0].contiguous(kCL);
      dw3 = fused_conv_wgrad(y2, dy3, coef16, 1, 1);
      g_wgrads++;
      da2 = std::get<0>(conv_grads(dy3, y2, w3, 1, true, false));
    } else {  // bn2's activation and mask written again for conv3's plain weight gradient
      auto a2 = torch::empty_like(y2, kCL);
      mask = torch::empty({M * C / 8}, y2.options().dtype(torch::kUInt8));
      glue::check(cuda::bn_act_apply(y2.data_ptr(), nullptr, coef.data_ptr<float>(), a2.data_ptr(),
                                     mask.data_ptr<uint8_t>(), kern::DType::F16, M, C, true, glue::stream()),
                  "resnet.fusion: bn2 recompute");
      std::tie(da2, dw3) = conv_grads(grads[0], a2, w3, 1, true);
    }
    da2 = da2.contiguous(kCL);
    auto dy2 = torch::empty_like(y2, kCL);
    auto dw = torch::empty({C}, f32), db = torch::empty({C}, f32);
    auto scratch = torch::empty({cuda::bn_act_bwd_scratch(M, C)}, f32);
    const auto err =
        fused ? cuda::bn_act_bwd_remask(da2.data_ptr(), y2.data_ptr(), coef.data_ptr<float>(), bn_w.data_ptr<float>(),
                                        mean.data_ptr<float>(), invstd.data_ptr<float>(), dy2.data_ptr(),
                                        dw.data_ptr<float>(), db.data_ptr<float>(), scratch.data_ptr<float>(),
                                        kern::DType::F16, M, C, glue::stream())
              : cuda::bn_act_bwd(da2.data_ptr(), nullptr, mask.data_ptr<uint8_t>(), y2.data_ptr(),
                                 bn_w.data_ptr<float>(), mean.data_ptr<float>(), invstd.data_ptr<float>(),
                                 dy2.data_ptr(), nullptr, dw.data_ptr<float>(), db.data_ptr<float>(),
                                 scratch.data_ptr<float>(), kern::DType::F16, M, C, true, glue::stream());
    glue::check(err, "resnet.fusion: bn2 backward");
    return {dy2, dw, db, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(),
            torch::Tensor(), dw3, torch::Tensor()};
  }
};

bool takes(const torch::Tensor& t) {
  return t.defined() && t.is_cuda() && t.scalar_type() == torch::kHalf && t.dim() == 4 &&
         t.is_contiguous(kCL) && reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0;
}

bool bn_takes(const torch::nn::BatchNorm2dImpl& m) {
  const auto& o = m.options;
  return m.is_training() && o.track_running_stats() && o.affine() && o.momentum().has_value() &&
         o.num_features() % 8 == 0;
}

torch::Tensor half_cl(const torch::Tensor& w) { return w.to(torch::kHalf).contiguous(kCL); }

}  // namespace

bool BottleneckFusion::forward(const BottleneckParts& p, const torch::Tensor& x, const torch::Tensor& identity,
                               std::pair<torch::Tensor, torch::Tensor>* out) {
  if (!fused_forward(p, x, identity, out)) {
    unfused_++;
    return false;
  }
  fused_++;
  g_fused++;
  return true;
}

bool BottleneckFusion::fused_forward(const BottleneckParts& p, const torch::Tensor& x,
                                     const torch::Tensor& identity, std::pair<torch::Tensor, torch::Tensor>* out) {
  if (state_ < 0 || !kernels::enabled("bn") || !takes(x) || !takes(identity)) return false;
  if (!bn_takes(*p.bn1) || !bn_takes(*p.bn2) || !bn_takes(*p.bn3)) return false;
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t width = p.w1.size(0), outc = p.w3.size(0);
  const FusedConvShape s1{N, C, H, W, width, 1, 1, false};
  const FusedConvShape s2{N, width, H, W, width, p.w2.size(2), p.stride, false};
  const FusedConvShape s3{N, width, s2.Ho(), s2.Wo(), outc, 1, 1, true};
  if (identity.sizes() != torch::IntArrayRef({N, outc, s3.Ho(), s3.Wo()})) return false;
  if (state_ == 0) {
    try {
      for (const auto* s : {&s1, &s2, &s3}) fused_conv_prepare(*s, x.device());
      state_ = 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "resnet.fusion: %s runs unfused: %s\n", name_.c_str(), e.what());
      state_ = -1;
      g_refused++;
      return false;
    }
    if (wgrad_) {
      FusedConvShape s3w = s3;
      s3w.wgrad = true;
      try {
        fused_conv_prepare(s3w, x.device());
      } catch (const std::exception& e) {
        std::fprintf(stderr, "resnet.fusion: %s: conv3's weight gradient runs unfused: %s\n", name_.c_str(),
                     e.what());
        wgrad_ = false;
        g_wgrad_refused++;
      }
    }
  }
  auto c1 = ConvGenStats::apply(x, half_cl(p.w1), 1);
  auto a1 = batch_norm_act_from_sums(*p.bn1, c1[0], c1[1], torch::Tensor(), true, false).first;
  auto c2 = ConvGenStats::apply(a1, half_cl(p.w2), p.stride);
  {
    torch::NoGradGuard ng;
    p.bn2->num_batches_tracked.add_(1);  // as BatchNorm's forward counts
  }
  auto c3 = BnConvGenStats::apply(c2[0], p.bn2->weight, p.bn2->bias, c2[1], p.bn2->running_mean,
                                  p.bn2->running_var, p.bn2->options.eps(), *p.bn2->options.momentum(),
                                  half_cl(p.w3), wgrad_);
  *out = batch_norm_act_from_sums(*p.bn3, c3[0], c3[1], identity, true, true);
  return true;
}

#endif

}  // namespace cs
