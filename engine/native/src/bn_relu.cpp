// bn_relu.cpp: see bn_relu.h.
#include "bn_relu.h"

#include "kernels.h"
#include "kernels_glue.h"

namespace cs {
namespace {

#ifdef CS_WITH_KERNELS
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

bool aligned(const torch::Tensor& t, int64_t n) {
  return reinterpret_cast<uintptr_t>(t.data_ptr()) % uintptr_t(n) == 0;
}

struct BatchNormAct : torch::autograd::Function<BatchNormAct> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, const torch::Tensor& bias,
                               const torch::Tensor& residual, torch::Tensor running_mean,
                               torch::Tensor running_var, double eps, double momentum, bool relu) {
    const int64_t C = x.size(1), M = x.numel() / C;
    auto f32 = x.options().dtype(torch::kFloat32);
    auto y = torch::empty_like(x, at::MemoryFormat::ChannelsLast);
    auto mask = relu ? torch::empty({M * C / 8}, x.options().dtype(torch::kUInt8)) : torch::Tensor();
    auto save_mean = torch::empty({C}, f32), save_invstd = torch::empty({C}, f32);
    auto scratch = torch::empty({cuda::bn_act_fwd_scratch(M, C)}, f32);
    const bool has_res = residual.numel() > 0;  // an empty placeholder: no residual add
    glue::check(cuda::bn_act_fwd(x.data_ptr(), has_res ? residual.data_ptr() : nullptr,
                                 weight.data_ptr<float>(), bias.data_ptr<float>(),
                                 running_mean.data_ptr<float>(), running_var.data_ptr<float>(),
                                 y.data_ptr(), relu ? mask.data_ptr<uint8_t>() : nullptr,
                                 save_mean.data_ptr<float>(), save_invstd.data_ptr<float>(),
                                 scratch.data_ptr<float>(), glue::dtype(x.scalar_type()), M, C,
                                 float(eps), float(momentum), relu, glue::stream()),
                "batch norm + ReLU forward kernels");
    ctx->save_for_backward({x, weight, save_mean, save_invstd, mask});
    ctx->saved_data["relu"] = relu;
    ctx->saved_data["residual"] = has_res;
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    auto x = saved[0], weight = saved[1], save_mean = saved[2], save_invstd = saved[3],
         mask = saved[4];
    const bool relu = ctx->saved_data["relu"].toBool();
    const bool has_res = ctx->saved_data["residual"].toBool();
    const int64_t C = x.size(1), M = x.numel() / C;
    auto dy = grads[0].to(x.scalar_type()).contiguous(at::MemoryFormat::ChannelsLast);
    if (!aligned(dy, 16)) dy = dy.clone(at::MemoryFormat::ChannelsLast);
    auto f32 = x.options().dtype(torch::kFloat32);
    auto dx = torch::empty_like(x, at::MemoryFormat::ChannelsLast);
    auto dres = has_res ? torch::empty_like(x, at::MemoryFormat::ChannelsLast) : torch::Tensor();
    auto dw = torch::empty({C}, f32), db = torch::empty({C}, f32);
    auto scratch = torch::empty({cuda::bn_act_bwd_scratch(M, C)}, f32);
    glue::check(cuda::bn_act_bwd(dy.data_ptr(), relu ? mask.data_ptr<uint8_t>() : nullptr,
                                 x.data_ptr(), weight.data_ptr<float>(),
                                 save_mean.data_ptr<float>(), save_invstd.data_ptr<float>(),
                                 dx.data_ptr(), has_res ? dres.data_ptr() : nullptr,
                                 dw.data_ptr<float>(), db.data_ptr<float>(),
                                 scratch.data_ptr<float>(), glue::dtype(x.scalar_type()), M, C, relu,
                                 glue::stream()),
                "batch norm + ReLU backward kernels");
    return {dx,  dw,  db, dres, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(),
            torch::Tensor()};
  }
};
#endif

}  // namespace

bool batch_norm_act_fused(const torch::nn::BatchNorm2dImpl& m, const torch::Tensor& x,
                          const torch::Tensor& residual) {
#ifdef CS_WITH_KERNELS
  const auto& o = m.options;
  if (!kernels::enabled("bn") || !m.is_training() || !o.track_running_stats() || !o.affine() ||
      !o.momentum().has_value())
    return false;
  if (!x.is_cuda() || x.dim() != 4 || x.numel() == 0 ||
      (x.scalar_type() != torch::kBFloat16 && x.scalar_type() != torch::kHalf) ||
      !x.is_contiguous(at::MemoryFormat::ChannelsLast) || !aligned(x, 16))
    return false;
  if (!cuda::bn_act_supports(x.size(1))) return false;
  for (const auto* t : {&m.weight, &m.bias, &m.running_mean, &m.running_var})
    if (t->scalar_type() != torch::kFloat32 || !t->is_contiguous() || !aligned(*t, 32) ||
        t->device() != x.device())
      return false;
  if (residual.defined() &&
      (residual.sizes() != x.sizes() || residual.scalar_type() != x.scalar_type() ||
       !residual.is_contiguous(at::MemoryFormat::ChannelsLast) || !aligned(residual, 16)))
    return false;
  return true;
#else
  return false;
#endif
}

torch::Tensor batch_norm_act(torch::nn::BatchNorm2dImpl& m, const torch::Tensor& x,
                             const torch::Tensor& residual, bool relu) {
#ifdef CS_WITH_KERNELS
  if (batch_norm_act_fused(m, x, residual)) {
    {
      torch::NoGradGuard ng;
      m.num_batches_tracked.add_(1);  // as BatchNorm's forward counts
    }
    // torch 2.x's Function::apply records every tensor input's device, so an
    // absent residual travels as an empty tensor, never an undefined one.
    return BatchNormAct::apply(x, m.weight, m.bias,
                               residual.defined() ? residual : torch::empty({0}, x.options()),
                               m.running_mean, m.running_var,
                               m.options.eps(), *m.options.momentum(), relu);
  }
#endif
  auto y = m.forward(x);
  if (residual.defined()) y = y.add_(residual);
  if (relu) y = y.relu_();
  return y;
}

}  // namespace cs
