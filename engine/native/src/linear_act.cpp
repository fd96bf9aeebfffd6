// linear_act.cpp: see linear_act.h.
#include "linear_act.h"

#include "compat.h"
#include "fp8_linear.h"
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

// The gradients of x, weight and bias from dz, the gradient of z = x2 wc^T +
// b, and db already summed: {dx (shaped dy_shape with in columns, in x's
// dtype), dw, db (in the dtypes of weight and bias), none for the act code}.
variable_list input_weight_grads(AutogradContext* ctx, std::vector<int64_t> dy_shape,
                                 const torch::Tensor& dz, const torch::Tensor& x2,
                                 const torch::Tensor& wc, const torch::Tensor& db) {
  torch::Tensor dx;
  if (ctx->needs_input_grad(0)) {
    dy_shape.back() = wc.size(1);
    dx = torch::mm(dz, wc).view(dy_shape).to(at::ScalarType(ctx->saved_data["x_dtype"].toInt()));
  }
  // bf16: the weight gradient in the weight's dtype from the matmul itself
  // (compat::mm_to); fp16 keeps autocast's fp16 result, so that an overflow
  // there still shows as inf to the loss scaler.
  const auto w_dtype = at::ScalarType(ctx->saved_data["w_dtype"].toInt());
  auto dw = wc.scalar_type() == torch::kBFloat16 ? compat::mm_to(dz.t(), x2, w_dtype)
                                                 : torch::mm(dz.t(), x2).to(w_dtype);
  // db undefined: the bias gradient is returned elsewhere (linear_bias_grad_elsewhere).
  auto gb = db.defined() ? db.to(at::ScalarType(ctx->saved_data["b_dtype"].toInt())) : db;
  return {dx, dw, gb, torch::Tensor()};
}

// z = x W^T + b in the autocast dtype, every dtype chosen here as autocast
// would choose it for linear; x2 is x as rows in that dtype, wc the weight
// cast. The dtypes of x, weight and bias are kept in ctx for the backward.
struct Projected {
  torch::Tensor x2, wc, z;
};
Projected project(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& weight,
                  const torch::Tensor& bias) {
  const auto dt = compat::autocast_dtype(x.device().type());
  c10::impl::ExcludeDispatchKeyGuard no_cpu(c10::DispatchKey::AutocastCPU);
  c10::impl::ExcludeDispatchKeyGuard no_cuda(c10::DispatchKey::AutocastCUDA);
  auto x2 = x.reshape({-1, x.size(-1)}).to(dt);
  // The casts made ahead with the model's others (LinearCasts), where they were.
  auto wc = LinearCasts::cast(weight, dt);
  // [rows, out], the bias in the matmul's epilogue.
  auto z = torch::linear(x2, wc, LinearCasts::cast(bias, dt));
  ctx->saved_data["x_dtype"] = int64_t(x.scalar_type());
  ctx->saved_data["w_dtype"] = int64_t(weight.scalar_type());
  ctx->saved_data["b_dtype"] = int64_t(bias.scalar_type());
  return {x2, wc, z};
}

// The "lin" kernel (CUDA, or its host version in the tests) in the backward.
struct LinearAct : torch::autograd::Function<LinearAct> {
  // bias_grad false (Act::None only): no bias gradient, no pass over dy.
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, const torch::Tensor& bias,
                               int64_t act_code, bool bias_grad) {
    const auto act = Act(act_code);
    TORCH_CHECK(bias_grad || act == Act::None, "linear_act: no bias gradient with an activation");
    ctx->saved_data["bias_grad"] = bias_grad;
    auto [x2, wc, z] = project(ctx, x, weight, bias);
    c10::impl::ExcludeDispatchKeyGuard no_cpu(c10::DispatchKey::AutocastCPU);
    c10::impl::ExcludeDispatchKeyGuard no_cuda(c10::DispatchKey::AutocastCUDA);
    auto y = activation(z, act);
    ctx->save_for_backward({x2, wc, act == Act::None ? torch::Tensor() : z});
    ctx->saved_data["act"] = act_code;
    auto shape = x.sizes().vec();
    shape.back() = weight.size(0);
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
    if (!ctx->saved_data["bias_grad"].toBool()) {
      auto g = input_weight_grads(ctx, grads[0].sizes().vec(), dy, x2, wc, torch::Tensor());
      g.emplace_back();  // bias_grad
      return g;
    }
    auto db = torch::empty({out}, dy.options().dtype(torch::kFloat32));
    auto dz = act == Act::None ? dy : torch::empty_like(dy);
    auto scratch = torch::empty({CS_KERNEL_FACT(dy, bias_act_bwd_scratch, rows, out)},
                                dy.options().dtype(torch::kFloat32));
    CS_KERNEL(dy, "linear layer bias (+ GELU) backward kernel", bias_act_bwd, dy.data_ptr(),
              act == Act::None ? nullptr : z.contiguous().data_ptr(),
              act == Act::None ? nullptr : dz.data_ptr(), db.data_ptr<float>(),
              scratch.data_ptr<float>(), glue::dtype(dt), act, rows, out);
    auto g = input_weight_grads(ctx, grads[0].sizes().vec(), dz, x2, wc, db);
    g.emplace_back();  // bias_grad
    return g;
  }
};

// The qkv projection: z = x W^T + b [B, T, 3 d] returned as q, k and v [B, H,
// T, D] (views of z as [B, T, 3, H, D]); the backward gathers their gradients
// into dz and sums the bias gradient in the same pass (the "qkv" kernel),
// where unbind's backward would stack them and a second pass sum dz.
struct LinearQKV : torch::autograd::Function<LinearQKV> {
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, const torch::Tensor& bias,
                               int64_t heads) {
    auto [x2, wc, z] = project(ctx, x, weight, bias);
    ctx->save_for_backward({x2, wc});
    const int64_t B = x.size(0), T = x.size(1), d = weight.size(0) / 3;
    auto parts = z.view({B, T, 3, heads, d / heads}).unbind(2);
    // Views of z, which nothing else holds: they are never written in place.
    return {parts[0].transpose(1, 2), parts[1].transpose(1, 2), parts[2].transpose(1, 2)};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    auto x2 = saved[0], wc = saved[1];
    const auto dt = wc.scalar_type();
    const int64_t rows = x2.size(0), C = wc.size(0);
    torch::Tensor shape_of;  // a defined gradient, for the shape [B, H, T, D]
    for (const auto& g : grads)
      if (g.defined()) shape_of = g;
    kern::HeadsGrad h{};
    h.B = shape_of.size(0), h.H = shape_of.size(1), h.T = shape_of.size(2), h.D = shape_of.size(3);
    std::vector<torch::Tensor> src(3);
    for (int s = 0; s < 3; s++) {
      // An output that took no part in the loss has no gradient: zeros.
      src[s] = grads[s].defined() ? grads[s].to(dt) : torch::zeros_like(shape_of, dt);
      if (src[s].stride(3) != 1) src[s] = src[s].contiguous();
      h.src[s] = src[s].data_ptr();
      for (int k = 0; k < 3; k++) h.stride[s][k] = src[s].stride(k);
    }
    auto dz = torch::empty({rows, C}, x2.options());
    auto db = torch::empty({C}, dz.options().dtype(torch::kFloat32));
    auto scratch = torch::empty({CS_KERNEL_FACT(dz, bias_act_bwd_scratch, rows, C)},
                                dz.options().dtype(torch::kFloat32));
    CS_KERNEL(dz, "qkv projection backward kernel", qkv_bwd, h, dz.data_ptr(), db.data_ptr<float>(),
              scratch.data_ptr<float>(), glue::dtype(dt));
    return input_weight_grads(ctx, {h.B, h.T, C}, dz, x2, wc, db);
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
  // precision fp8: the matmuls in FP8 (fp8_linear.h), the activation's backward
  // fused with the bias gradient as below.
  if (fp8::active(x, weight)) return fp8::linear(x, weight, bias, fp8::current(), act);
  if (linear_act_fused(x, weight)) return LinearAct::apply(x, weight, bias, int64_t(act), true);
  return activation(torch::linear(x, weight, bias), act);
}

torch::Tensor linear_bias_grad_elsewhere(const torch::Tensor& x, const torch::Tensor& weight,
                                         const torch::Tensor& bias) {
  TORCH_CHECK(linear_act_fused(x, weight) && !fp8::active(x, weight),
              "linear_bias_grad_elsewhere: needs the \"lin\" kernel (linear_act_fused) and no fp8");
  return LinearAct::apply(x, weight, bias, int64_t(Act::None), false);
}

bool linear_qkv_fused(const torch::Tensor& x, const torch::Tensor& weight, int64_t heads) {
  return kernels::enabled("qkv") && linear_act_fused(x, weight) && x.dim() == 3 && heads > 0 &&
         weight.size(0) % (3 * heads) == 0;
}

std::array<torch::Tensor, 3> linear_qkv(const torch::Tensor& x, const torch::Tensor& weight,
                                        const torch::Tensor& bias, int64_t heads) {
  const int64_t B = x.size(0), T = x.size(1), d = weight.size(0) / 3;
  if (!fp8::active(x, weight) && linear_qkv_fused(x, weight, heads)) {
    auto o = LinearQKV::apply(x, weight, bias, heads);
    return {o[0], o[1], o[2]};
  }
  // unbind, not qkv[i]: its backward stacks the three gradients into one
  // [B, T, 3, H, D] tensor, where three selects would each fill a zero
  // tensor of the full size and add them up.
  auto p = linear_act(x, weight, bias, Act::None).view({B, T, 3, heads, d / heads}).unbind(2);
  return {p[0].transpose(1, 2), p[1].transpose(1, 2), p[2].transpose(1, 2)};
}

}  // namespace cs
