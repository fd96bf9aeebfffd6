// add_layer_norm.cpp: see add_layer_norm.h.
#include "add_layer_norm.h"

#include <utility>
#include <vector>

#include "kernels.h"
#include "kernels_glue.h"

namespace cs {
namespace {

AddNorm portable(const torch::Tensor& x, const torch::Tensor& delta, const torch::Tensor& weight,
                 const torch::Tensor& bias, double eps, at::ScalarType out) {
  AddNorm o;
  o.r = delta.defined() ? x + delta : x;
  // Past autocast's fp32 rule for layer_norm (as block_layer_norm).
  c10::impl::ExcludeDispatchKeyGuard no_cuda(c10::DispatchKey::AutocastCUDA);
  c10::impl::ExcludeDispatchKeyGuard no_cpu(c10::DispatchKey::AutocastCPU);
  o.y = torch::layer_norm(o.r.to(out), {x.size(-1)}, weight.to(out), bias.to(out), eps);
  return o;
}

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The "ln" kernels (CUDA, or their host versions in the tests). Outputs {r, y},
// and with twin y once more ({r, y, y2}: y2 an alias of y whose gradient the
// backward kernel adds to y's as it reads them);
// without a delta r is x itself, returned through this function so that r's
// gradient is added to x's inside the backward kernel (not by autograd, in a
// kernel of its own, where x also feeds the next block). Gradients of unused
// outputs stay undefined (no zero tensor made and read: BERT never uses r).
// An absent delta comes as an empty tensor: torch 2.x's Function::apply
// records every tensor input's device, which an undefined tensor does not have.
struct AddLayerNorm : torch::autograd::Function<AddLayerNorm> {
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x_in,
                               const torch::Tensor& delta_in, const torch::Tensor& weight,
                               const torch::Tensor& bias, double eps, int64_t out_dtype,
                               bool twin) {
    ctx->set_materialize_grads(false);
    const auto out = at::ScalarType(out_dtype);
    const bool has_delta = delta_in.numel() > 0;  // an empty placeholder: no residual add
    auto x = x_in.contiguous();
    auto delta = has_delta ? delta_in.contiguous() : torch::Tensor();
    const int64_t C = x.size(-1), rows = x.numel() / C;
    auto w = weight.to(torch::kFloat32).contiguous(), b = bias.to(torch::kFloat32).contiguous();
    auto r = has_delta ? torch::empty_like(x) : x;
    auto y = torch::empty(x.sizes(), x.options().dtype(out));
    auto f32 = x.options().dtype(torch::kFloat32);
    auto mean = torch::empty({rows}, f32), rstd = torch::empty({rows}, f32);
    CS_KERNEL(x, "add_layer_norm forward kernel", layer_norm_fwd, x.data_ptr(),
              has_delta ? delta.data_ptr() : nullptr, w.data_ptr<float>(), b.data_ptr<float>(),
              has_delta ? r.data_ptr() : nullptr, y.data_ptr(), mean.data_ptr<float>(),
              rstd.data_ptr<float>(), glue::dtype(x.scalar_type()),
              glue::dtype(has_delta ? delta.scalar_type() : x.scalar_type()), glue::dtype(out),
              rows, C, float(eps));
    ctx->save_for_backward({r, mean, rstd, w});
    ctx->saved_data["has_delta"] = has_delta;
    ctx->saved_data["delta_dtype"] = int64_t(has_delta ? delta.scalar_type() : x.scalar_type());
    ctx->saved_data["w_dtype"] = int64_t(weight.scalar_type());
    ctx->saved_data["b_dtype"] = int64_t(bias.scalar_type());
    ctx->saved_data["out"] = out_dtype;
    if (twin) return {r, y, at::alias(y)};
    return {r, y};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    auto r = saved[0], mean = saved[1], rstd = saved[2], w = saved[3];
    const bool has_delta = ctx->saved_data["has_delta"].toBool();
    const auto delta_dtype = at::ScalarType(ctx->saved_data["delta_dtype"].toInt());
    const auto out = at::ScalarType(ctx->saved_data["out"].toInt());
    // Any of them undefined where unused.
    torch::Tensor dr = grads[0], dy = grads[1];
    torch::Tensor dy2 = grads.size() > 2 ? grads[2] : torch::Tensor();
    if (!dy.defined()) std::swap(dy, dy2);
    const int64_t C = r.size(-1), rows = r.numel() / C;
    if (!dy.defined()) dy = torch::zeros(r.sizes(), r.options().dtype(out));
    dy = dy.to(out).contiguous();
    if (dy2.defined()) dy2 = dy2.to(out).contiguous();
    if (dr.defined()) dr = dr.to(r.scalar_type()).contiguous();
    auto dx = torch::empty_like(r);
    const bool separate = has_delta && delta_dtype != r.scalar_type();
    auto ddelta = separate ? torch::empty(r.sizes(), r.options().dtype(delta_dtype)) : torch::Tensor();
    auto f32 = r.options().dtype(torch::kFloat32);
    auto dw = torch::empty({C}, f32), db = torch::empty({C}, f32);
    auto scratch = torch::empty(
        {std::max<int64_t>(1, CS_KERNEL_FACT(r, layer_norm_bwd_scratch, rows, C))}, f32);
    CS_KERNEL(r, "add_layer_norm backward kernel", layer_norm_bwd, dy.data_ptr(),
              dy2.defined() ? dy2.data_ptr() : nullptr, dr.defined() ? dr.data_ptr() : nullptr,
              r.data_ptr(), mean.data_ptr<float>(), rstd.data_ptr<float>(), w.data_ptr<float>(),
              dx.data_ptr(),
              separate ? ddelta.data_ptr() : nullptr, dw.data_ptr<float>(), db.data_ptr<float>(),
              scratch.data_ptr<float>(), glue::dtype(r.scalar_type()), glue::dtype(delta_dtype),
              glue::dtype(out), rows, C);
    const auto w_dtype = at::ScalarType(ctx->saved_data["w_dtype"].toInt());
    const auto b_dtype = at::ScalarType(ctx->saved_data["b_dtype"].toInt());
    torch::Tensor gdelta;
    if (has_delta) gdelta = separate ? ddelta : dx;
    return {dx, gdelta, dw.to(w_dtype), db.to(b_dtype), torch::Tensor(), torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

bool add_layer_norm_fused(const torch::Tensor& x, const torch::Tensor& delta, at::ScalarType out) {
  if (!kernels::enabled("ln") || !glue::runs_here(x) || x.dim() < 1 || x.numel() == 0) return false;
  if (!glue::has_dtype(x.scalar_type()) || !glue::has_dtype(out)) return false;
  if (delta.defined() && (delta.device() != x.device() || delta.sizes() != x.sizes() ||
                          !glue::has_dtype(delta.scalar_type())))
    return false;
  const auto td = delta.defined() ? delta.scalar_type() : x.scalar_type();
  return CS_KERNEL_FACT(x, layer_norm_supports, x.size(-1)) &&
         CS_KERNEL_FACT(x, layer_norm_dtypes, glue::dtype(x.scalar_type()), glue::dtype(td),
                        glue::dtype(out));
}

namespace {

// add_layer_norm, y once or twice ({r, y} or {r, y, y2}).
std::vector<torch::Tensor> run(const torch::Tensor& x, const torch::Tensor& delta,
                               const torch::Tensor& weight, const torch::Tensor& bias, double eps,
                               at::ScalarType out, bool twin) {
  if (add_layer_norm_fused(x, delta, out))
    return AddLayerNorm::apply(x, delta.defined() ? delta : torch::empty({0}, x.options()), weight,
                               bias, eps, int64_t(out), twin && kernels::enabled("res"));
  auto o = portable(x, delta, weight, bias, eps, out);
  return {o.r, o.y};
}

}  // namespace

AddNorm add_layer_norm(const torch::Tensor& x, const torch::Tensor& delta,
                       const torch::Tensor& weight, const torch::Tensor& bias, double eps,
                       at::ScalarType out) {
  auto o = run(x, delta, weight, bias, eps, out, false);
  return {o[0], o[1]};
}

std::pair<torch::Tensor, torch::Tensor> add_layer_norm_twin(const torch::Tensor& x,
                                                            const torch::Tensor& delta,
                                                            const torch::Tensor& weight,
                                                            const torch::Tensor& bias, double eps,
                                                            at::ScalarType out) {
  auto o = run(x, delta, weight, bias, eps, out, true);
  return {o[1], o.size() > 2 ? o[2] : o[1]};
}

}  // namespace cs
