// bn_relu.cpp: see bn_relu.h.
#include "bn_relu.h"

#include "kernels.h"
#include "kernels_glue.h"
#include "recompute.h"

namespace cs {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

bool aligned(const torch::Tensor& t, int64_t n) {
  return reinterpret_cast<uintptr_t>(t.data_ptr()) % uintptr_t(n) == 0;
}

// The "bn" kernels (CUDA, or their host versions in the tests). An absent
// residual comes as an empty tensor: torch 2.x's Function::apply records every
// tensor input's device, which an undefined tensor does not have. With twin
// the output comes twice, {y, an alias of y}: the two gradients arrive apart
// and the backward kernel adds them as it reads them (batch_norm_act_twin).
struct BatchNormAct : torch::autograd::Function<BatchNormAct> {
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, const torch::Tensor& bias,
                               const torch::Tensor& residual, torch::Tensor running_mean,
                               torch::Tensor running_var, double eps, double momentum, bool relu,
                               bool twin, const torch::Tensor& sums) {
    ctx->set_materialize_grads(false);  // an unused twin's gradient stays undefined
    const int64_t C = x.size(1), M = x.numel() / C;
    auto f32 = x.options().dtype(torch::kFloat32);
    auto y = torch::empty_like(x, at::MemoryFormat::ChannelsLast);
    auto mask = relu ? torch::empty({M * C / 8}, x.options().dtype(torch::kUInt8)) : torch::Tensor();
    torch::Tensor save_mean, save_invstd;  // the batch's, for the backward kernels
    const bool has_res = residual.numel() > 0;  // an empty placeholder: no residual add
    if (sums.numel() > 0) {
      // The statistics as sums [2][C] (a fused convolution's, resnet_fusion.h): no
      // statistics pass; the finalize and the apply as bn_act_fwd runs them.
#ifdef CS_WITH_KERNELS
      TORCH_CHECK(x.is_cuda() && sums.is_cuda(), "batch norm from sums: CUDA tensors only");
      auto fin = batch_norm_finalize_sums(sums, weight, bias, running_mean, running_var, M, eps, momentum,
                                          false, "batch norm finalize from sums");
      save_mean = fin.mean;
      save_invstd = fin.invstd;
      glue::check(cuda::bn_act_apply(x.data_ptr(), has_res ? residual.data_ptr() : nullptr,
                                     fin.coef.data_ptr<float>(), y.data_ptr(),
                                     relu ? mask.data_ptr<uint8_t>() : nullptr,
                                     glue::dtype(x.scalar_type()), M, C, relu, glue::stream()),
                  "batch norm apply");
#else
      TORCH_CHECK(false, "batch norm from sums: this build has no CUDA kernels");
#endif
    } else {
      save_mean = torch::empty({C}, f32);
      save_invstd = torch::empty({C}, f32);
      auto scratch = torch::empty({CS_KERNEL_FACT(x, bn_act_fwd_scratch, M, C)}, f32);
      CS_KERNEL(x, "batch norm + ReLU forward kernels", bn_act_fwd, x.data_ptr(),
                has_res ? residual.data_ptr() : nullptr, weight.data_ptr<float>(),
                bias.data_ptr<float>(), running_mean.data_ptr<float>(),
                running_var.data_ptr<float>(), y.data_ptr(),
                relu ? mask.data_ptr<uint8_t>() : nullptr, save_mean.data_ptr<float>(),
                save_invstd.data_ptr<float>(), scratch.data_ptr<float>(),
                glue::dtype(x.scalar_type()), M, C, float(eps), float(momentum), relu);
    }
    ctx->save_for_backward({x, weight, save_mean, save_invstd, mask});
    ctx->saved_data["relu"] = relu;
    ctx->saved_data["residual"] = has_res;
    if (twin) return {y, at::alias(y)};
    return {y};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    auto x = saved[0], weight = saved[1], save_mean = saved[2], save_invstd = saved[3],
         mask = saved[4];
    const bool relu = ctx->saved_data["relu"].toBool();
    const bool has_res = ctx->saved_data["residual"].toBool();
    const int64_t C = x.size(1), M = x.numel() / C;
    // The output's gradients: one, or the twins' two (either may be unused).
    torch::Tensor dy = grads[0], dy2 = grads.size() > 1 ? grads[1] : torch::Tensor();
    if (!dy.defined()) std::swap(dy, dy2);
    auto prepare = [&](torch::Tensor g) {
      g = g.to(x.scalar_type()).contiguous(at::MemoryFormat::ChannelsLast);
      return aligned(g, 16) ? g : g.clone(at::MemoryFormat::ChannelsLast);
    };
    dy = prepare(dy);
    if (dy2.defined()) dy2 = prepare(dy2);
    auto f32 = x.options().dtype(torch::kFloat32);
    auto dx = torch::empty_like(x, at::MemoryFormat::ChannelsLast);
    // The kernels keep the masked sum of two gradients where the residual's
    // gradient goes: without a residual, in a tensor of its own.
    auto dres = has_res || dy2.defined() ? torch::empty_like(x, at::MemoryFormat::ChannelsLast)
                                         : torch::Tensor();
    auto dw = torch::empty({C}, f32), db = torch::empty({C}, f32);
    auto scratch = torch::empty({CS_KERNEL_FACT(x, bn_act_bwd_scratch, M, C)}, f32);
    CS_KERNEL(x, "batch norm + ReLU backward kernels", bn_act_bwd, dy.data_ptr(),
              dy2.defined() ? dy2.data_ptr() : nullptr, relu ? mask.data_ptr<uint8_t>() : nullptr,
              x.data_ptr(), weight.data_ptr<float>(), save_mean.data_ptr<float>(),
              save_invstd.data_ptr<float>(), dx.data_ptr(), dres.defined() ? dres.data_ptr() : nullptr,
              dw.data_ptr<float>(), db.data_ptr<float>(), scratch.data_ptr<float>(),
              glue::dtype(x.scalar_type()), M, C, relu);
    return {dx, dw, db, has_res ? dres : torch::Tensor(), torch::Tensor(), torch::Tensor(),
            torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

BnFromSums batch_norm_finalize_sums(const torch::Tensor& sums, const torch::Tensor& weight,
                                    const torch::Tensor& bias, torch::Tensor running_mean,
                                    torch::Tensor running_var, int64_t M, double eps,
                                    double momentum, bool fp16_coef, const char* what) {
#ifdef CS_WITH_KERNELS
  const int64_t C = weight.size(0);
  TORCH_CHECK(sums.is_cuda() && sums.scalar_type() == torch::kFloat32 && sums.is_contiguous() &&
                  sums.numel() == 2 * C,
              what, ": sums must be contiguous CUDA fp32 [2, C]");
  auto f32 = sums.options();
  BnFromSums o{torch::empty({C}, f32), torch::empty({C}, f32), torch::empty({2 * C}, f32),
               fp16_coef ? torch::empty({2, C}, f32.dtype(torch::kHalf)) : torch::Tensor()};
  glue::check(cuda::bn_sums_finalize(sums.data_ptr<float>(), sums.data_ptr<float>() + C,
                                     weight.data_ptr<float>(), bias.data_ptr<float>(),
                                     running_mean.data_ptr<float>(), running_var.data_ptr<float>(),
                                     o.mean.data_ptr<float>(), o.invstd.data_ptr<float>(),
                                     o.coef.data_ptr<float>(), fp16_coef ? o.coef16.data_ptr() : nullptr,
                                     M, C, float(eps), float(momentum), glue::stream()),
              what);
  return o;
#else
  TORCH_CHECK(false, what, ": this build has no CUDA kernels");
#endif
}

bool batch_norm_act_fused(const torch::nn::BatchNorm2dImpl& m, const torch::Tensor& x,
                          const torch::Tensor& residual) {
  const auto& o = m.options;
  if (!kernels::enabled("bn") || !m.is_training() || !o.track_running_stats() || !o.affine() ||
      !o.momentum().has_value())
    return false;
  if (!glue::runs_here(x) || x.dim() != 4 || x.numel() == 0 ||
      (x.scalar_type() != torch::kBFloat16 && x.scalar_type() != torch::kHalf) ||
      !x.is_contiguous(at::MemoryFormat::ChannelsLast) || !aligned(x, 16))
    return false;
  if (!CS_KERNEL_FACT(x, bn_act_supports, x.size(1))) return false;
  for (const auto* t : {&m.weight, &m.bias, &m.running_mean, &m.running_var})
    if (t->scalar_type() != torch::kFloat32 || !t->is_contiguous() || !aligned(*t, 32) ||
        t->device() != x.device())
      return false;
  if (residual.defined() &&
      (residual.device() != x.device() || residual.sizes() != x.sizes() ||
       residual.scalar_type() != x.scalar_type() ||
       !residual.is_contiguous(at::MemoryFormat::ChannelsLast) || !aligned(residual, 16)))
    return false;
  return true;
}

namespace {

// m's running statistics and batch count as they are now, to put back.
struct RunningStats {
  torch::Tensor mean, var, count;
  explicit RunningStats(const torch::nn::BatchNorm2dImpl& m) {
    torch::NoGradGuard ng;
    for (auto [from, to] : {std::pair{&m.running_mean, &mean}, {&m.running_var, &var},
                            {&m.num_batches_tracked, &count}})
      if (from->defined()) *to = from->clone();
  }
  // Through variable_data(): the same storage under a version counter of its
  // own, so the batch norm that just ran, which saved running_mean and
  // running_var for its backward, does not see them as modified in place
  // (its training-mode backward reads only the batch statistics).
  void restore(torch::nn::BatchNorm2dImpl& m) const {
    torch::NoGradGuard ng;
    if (mean.defined()) m.running_mean.variable_data().copy_(mean);
    if (var.defined()) m.running_var.variable_data().copy_(var);
    if (count.defined()) m.num_batches_tracked.variable_data().copy_(count);
  }
};

std::pair<torch::Tensor, torch::Tensor> bn_act_once(torch::nn::BatchNorm2dImpl& m,
                                                    const torch::Tensor& x,
                                                    const torch::Tensor& residual, bool relu,
                                                    bool twin);

// batch_norm_act, its output once (twin false) or twice. In a checkpointed
// block's recomputation (recompute.h) the same kernels run again on the same
// input, so the output, and the gradient through it, are the forward's; the
// running statistics and count that pass updates a second time in the step
// are put back (before, a checkpointed ResNet moved them twice per step).
std::pair<torch::Tensor, torch::Tensor> bn_act(torch::nn::BatchNorm2dImpl& m,
                                               const torch::Tensor& x,
                                               const torch::Tensor& residual, bool relu,
                                               bool twin) {
  if (!recomputing() || !m.is_training()) return bn_act_once(m, x, residual, relu, twin);
  const RunningStats before(m);
  auto out = bn_act_once(m, x, residual, relu, twin);
  before.restore(m);
  return out;
}

std::pair<torch::Tensor, torch::Tensor> bn_act_once(torch::nn::BatchNorm2dImpl& m,
                                                    const torch::Tensor& x,
                                                    const torch::Tensor& residual, bool relu,
                                                    bool twin) {
  if (batch_norm_act_fused(m, x, residual)) {
    twin = twin && kernels::enabled("res");
    {
      torch::NoGradGuard ng;
      m.num_batches_tracked.add_(1);  // as BatchNorm's forward counts
    }
    auto o = BatchNormAct::apply(x, m.weight, m.bias,
                                 residual.defined() ? residual : torch::empty({0}, x.options()),
                                 m.running_mean, m.running_var, m.options.eps(),
                                 *m.options.momentum(), relu, twin, torch::empty({0}, x.options()));
    return {o[0], twin ? o[1] : o[0]};
  }
  auto y = m.forward(x);
  if (residual.defined()) y = y.add_(residual);
  if (relu) y = y.relu_();
  return {y, y};
}

}  // namespace

std::pair<torch::Tensor, torch::Tensor> batch_norm_act_from_sums(torch::nn::BatchNorm2dImpl& m,
                                                                 const torch::Tensor& x,
                                                                 const torch::Tensor& sums,
                                                                 const torch::Tensor& residual,
                                                                 bool relu, bool twin) {
  TORCH_CHECK(batch_norm_act_fused(m, x, residual) && x.is_cuda(),
              "batch norm from sums: needs the bn kernels on a CUDA channels_last tensor");
  TORCH_CHECK(sums.is_cuda() && sums.scalar_type() == torch::kFloat32 && sums.numel() == 2 * x.size(1),
              "batch norm from sums: sums must be CUDA fp32 [2, C]");
  TORCH_CHECK(!recomputing(), "batch norm from sums: not under activation checkpointing");
  twin = twin && kernels::enabled("res");
  {
    torch::NoGradGuard ng;
    m.num_batches_tracked.add_(1);  // as BatchNorm's forward counts
  }
  auto o = BatchNormAct::apply(x, m.weight, m.bias,
                               residual.defined() ? residual : torch::empty({0}, x.options()),
                               m.running_mean, m.running_var, m.options.eps(), *m.options.momentum(),
                               relu, twin, sums.contiguous());
  return {o[0], twin ? o[1] : o[0]};
}

torch::Tensor batch_norm_act(torch::nn::BatchNorm2dImpl& m, const torch::Tensor& x,
                             const torch::Tensor& residual, bool relu) {
  return bn_act(m, x, residual, relu, false).first;
}

std::pair<torch::Tensor, torch::Tensor> batch_norm_act_twin(torch::nn::BatchNorm2dImpl& m,
                                                            const torch::Tensor& x,
                                                            const torch::Tensor& residual,
                                                            bool relu) {
  return bn_act(m, x, residual, relu, true);
}

}  // namespace cs
