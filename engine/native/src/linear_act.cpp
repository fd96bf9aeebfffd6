// linear_act.cpp: see linear_act.h.
#include "linear_act.h"

#include "compat.h"
#include "kernels.h"
#include "kernels_glue.h"
#include "linear_casts.h"

namespace cs {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

const char* approximation(Act act) { return act == Act::GeluTanh ? "tanh" : "none"; }

torch::Tensor activation(const torch::Tensor& z, Act act) {
  return act == Act::None ? z : torch::gelu(z, approximation(act));
}

// The "lin" kernel (CUDA, or its host version in the tests) in the backward.
struct LinearAct : torch::autograd::Function<LinearAct> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, const torch::Tensor& bias,
                               int64_t act_code) {
    // Every dtype below is chosen here, as autocast would choose it for linear.
    const auto dt = compat::autocast_dtype(x.device().type());
    c10::impl::ExcludeDispatchKeyGuard no_cpu(c10::DispatchKey::AutocastCPU);
    c10::impl::ExcludeDispatchKeyGuard no_cuda(c10::DispatchKey::AutocastCUDA);
    const auto act = Act(act_code);
    const int64_t in = x.size(-1), out = weight.size(0);
    auto x2 = x.reshape({-1, in}).to(dt);
    // The casts made ahead with the model's others (LinearCasts), where they were.
    auto wc = LinearCasts::cast(weight, dt);
    // [rows, out], the bias in the matmul's epilogue.
    auto z = torch::linear(x2, wc, LinearCasts::cast(bias, dt));
    auto y = activation(z, act);
    ctx->save_for_backward({x2, wc, act == Act::None ? torch::Tensor() : z});
    ctx->saved_data["act"] = act_code;
    ctx->saved_data["x_dtype"] = int64_t(x.scalar_type());
    ctx->saved_data["w_dtype"] = int64_t(weight.scalar_type());
    ctx->saved_data["b_dtype"] = int64_t(bias.scalar_type());
    auto shape = x.sizes().vec();
    shape.back() = out;
    // Not a view (a custom function's view output could not be modified in
    // place, and would lose this node if its base were).
    return at::_unsafe_view(y, shape);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    auto x2 = saved[0], wc = saved[1], z = saved[2];
    const auto act = Act(ctx->saved_data["act"].toInt());
    const auto dt = wc.scalar_type();
    const int64_t out = wc.size(0);
    auto dy = grads[0].reshape({-1, out}).to(dt).contiguous();
    const int64_t rows = dy.size(0);
    auto db = torch::empty({out}, dy.options().dtype(torch::kFloat32));
    auto dz = act == Act::None ? dy : torch::empty_like(dy);
    auto scratch = torch::empty({CS_KERNEL_FACT(dy, bias_act_bwd_scratch, rows, out)},
                                dy.options().dtype(torch::kFloat32));
    CS_KERNEL(dy, "linear layer bias (+ GELU) backward kernel", bias_act_bwd, dy.data_ptr(),
              act == Act::None ? nullptr : z.contiguous().data_ptr(),
              act == Act::None ? nullptr : dz.data_ptr(), db.data_ptr<float>(),
              scratch.data_ptr<float>(), glue::dtype(dt), act, rows, out);
    torch::Tensor dx;
    if (ctx->needs_input_grad(0)) {
      auto shape = grads[0].sizes().vec();
      shape.back() = wc.size(1);
      dx = torch::mm(dz, wc).view(shape).to(at::ScalarType(ctx->saved_data["x_dtype"].toInt()));
    }
    // bf16: the weight gradient in the weight's dtype from the matmul itself
    // (compat::mm_to); fp16 keeps autocast's fp16 result, so that an overflow
    // there still shows as inf to the loss scaler.
    const auto w_dtype = at::ScalarType(ctx->saved_data["w_dtype"].toInt());
    auto dw = dt == torch::kBFloat16 ? compat::mm_to(dz.t(), x2, w_dtype)
                                     : torch::mm(dz.t(), x2).to(w_dtype);
    return {dx, dw, db.to(at::ScalarType(ctx->saved_data["b_dtype"].toInt())), torch::Tensor()};
  }
};

}  // namespace

bool linear_act_fused(const torch::Tensor& x, const torch::Tensor& weight) {
  if (!kernels::enabled("lin") || !glue::runs_here(x) || x.dim() < 1 || x.numel() == 0) return false;
  const auto dev = x.device().type();
  if (!compat::autocast_enabled(dev)) return false;
  const auto dt = compat::autocast_dtype(dev);
  return (dt == torch::kBFloat16 || dt == torch::kHalf) && weight.device() == x.device() &&
         weight.dim() == 2 && weight.size(1) == x.size(-1);
}

torch::Tensor linear_act(const torch::Tensor& x, const torch::Tensor& weight,
                         const torch::Tensor& bias, Act act) {
  if (linear_act_fused(x, weight)) return LinearAct::apply(x, weight, bias, int64_t(act));
  return activation(torch::linear(x, weight, bias), act);
}

}  // namespace cs
