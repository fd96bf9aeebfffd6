// add_layer_norm.cpp: see add_layer_norm.h.
#include "add_layer_norm.h"

#include <utility>
#include <vector>

#include "compat.h"
#include "fp8_linear.h"
#include "kernels.h"
#include "kernels_glue.h"
#include "linear_act.h"

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
// outputs stay undefined (no zero tensor made and read).
// Without keep_r ("lny": a caller that never uses r, BERT's) r is not an
// output and, with a delta, stored only in the columns whose x^ y does not
// give back (kern::ln_keeps_r: |w| < max(|b|, 2^-14), cuda/ln_keep.h): the
// backward recomputes x^ from y, w and b in the others ({y} or {y, y2}). The
// buffer for r is allocated whole (the kept columns are known on the device
// only), so "lny" saves r's writes and reads, not its memory. A defined lin_bias ("lnb") is the bias of the linear
// layer whose output delta is: its value is not read, its gradient (delta's
// gradient summed over the rows) comes from the backward kernel, and that
// linear layer's own node returns none (linear_bias_grad_elsewhere).
// An absent delta or lin_bias comes as an empty tensor: torch 2.x's
// Function::apply records every tensor input's device, which an undefined
// tensor does not have.
struct AddLayerNorm : torch::autograd::Function<AddLayerNorm> {
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x_in,
                               const torch::Tensor& delta_in, const torch::Tensor& weight,
                               const torch::Tensor& bias, const torch::Tensor& lin_bias, double eps,
                               int64_t out_dtype, bool twin, bool keep_r) {
    ctx->set_materialize_grads(false);
    const auto out = at::ScalarType(out_dtype);
    const bool has_delta = delta_in.numel() > 0;  // an empty placeholder: no residual add
    const bool from_y = !keep_r && has_delta;     // r in the kept columns only: x^ from y elsewhere
    auto x = x_in.contiguous();
    auto delta = has_delta ? delta_in.contiguous() : torch::Tensor();
    const int64_t C = x.size(-1), rows = x.numel() / C;
    auto w = weight.to(torch::kFloat32).contiguous(), b = bias.to(torch::kFloat32).contiguous();
    auto r = !has_delta ? x : torch::empty_like(x);
    auto y = torch::empty(x.sizes(), x.options().dtype(out));
    auto f32 = x.options().dtype(torch::kFloat32);
    auto mean = torch::empty({rows}, f32), rstd = torch::empty({rows}, f32);
    CS_KERNEL(x, "add_layer_norm forward kernel", layer_norm_fwd, x.data_ptr(),
              has_delta ? delta.data_ptr() : nullptr, w.data_ptr<float>(), b.data_ptr<float>(),
              has_delta ? r.data_ptr() : nullptr, y.data_ptr(), mean.data_ptr<float>(),
              rstd.data_ptr<float>(), glue::dtype(x.scalar_type()),
              glue::dtype(has_delta ? delta.scalar_type() : x.scalar_type()), glue::dtype(out),
              rows, C, float(eps), from_y);
    // from_y: y (an output: saved as such) and b besides (r's kept columns only).
    if (from_y)
      ctx->save_for_backward({r, mean, rstd, w, y, b});
    else
      ctx->save_for_backward({r, mean, rstd, w});
    ctx->saved_data["from_y"] = from_y;
    ctx->saved_data["keep_r"] = keep_r;
    ctx->saved_data["r_dtype"] = int64_t(x.scalar_type());
    ctx->saved_data["has_delta"] = has_delta;
    ctx->saved_data["delta_dtype"] = int64_t(has_delta ? delta.scalar_type() : x.scalar_type());
    ctx->saved_data["w_dtype"] = int64_t(weight.scalar_type());
    ctx->saved_data["b_dtype"] = int64_t(bias.scalar_type());
    const bool lnb = lin_bias.numel() > 0;
    ctx->saved_data["lin_bias_dtype"] = int64_t(lnb ? lin_bias.scalar_type() : torch::kFloat32);
    ctx->saved_data["lnb"] = lnb;
    ctx->saved_data["out"] = out_dtype;
    variable_list outs;
    if (keep_r) outs.push_back(r);
    outs.push_back(y);
    if (twin) outs.push_back(at::alias(y));
    return outs;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const bool from_y = ctx->saved_data["from_y"].toBool();
    const bool keep_r = ctx->saved_data["keep_r"].toBool();
    const bool has_delta = ctx->saved_data["has_delta"].toBool();
    const bool lnb = ctx->saved_data["lnb"].toBool();
    const auto r_dtype = at::ScalarType(ctx->saved_data["r_dtype"].toInt());
    const auto delta_dtype = at::ScalarType(ctx->saved_data["delta_dtype"].toInt());
    const auto out = at::ScalarType(ctx->saved_data["out"].toInt());
    // {r, mean, rstd, w (, y, b)}: see forward.
    const torch::Tensor& stored = saved[0];
    // Any of them undefined where unused.
    const size_t at = keep_r ? 1 : 0;
    torch::Tensor dr = keep_r ? grads[0] : torch::Tensor(), dy = grads[at];
    torch::Tensor dy2 = grads.size() > at + 1 ? grads[at + 1] : torch::Tensor();
    if (!dy.defined()) std::swap(dy, dy2);
    const int64_t C = stored.size(-1), rows = stored.numel() / C;
    if (!dy.defined()) dy = torch::zeros(stored.sizes(), stored.options().dtype(out));
    dy = dy.to(out).contiguous();
    if (dy2.defined()) dy2 = dy2.to(out).contiguous();
    if (dr.defined()) dr = dr.to(r_dtype).contiguous();
    auto dx = torch::empty(stored.sizes(), stored.options().dtype(r_dtype));
    const bool separate = has_delta && delta_dtype != r_dtype;
    auto ddelta = separate ? torch::empty(stored.sizes(), stored.options().dtype(delta_dtype))
                           : torch::Tensor();
    auto f32 = stored.options().dtype(torch::kFloat32);
    auto dw = torch::empty({C}, f32), db = torch::empty({C}, f32);
    auto dsum = lnb ? torch::empty({C}, f32) : torch::Tensor();  // the delta's column sums
    auto scratch = torch::empty(
        {std::max<int64_t>(1, CS_KERNEL_FACT(stored, layer_norm_bwd_scratch, rows, C))}, f32);
    kern::LnBwd a;
    a.dy = dy.data_ptr();
    a.dy2 = dy2.defined() ? dy2.data_ptr() : nullptr;
    a.dr = dr.defined() ? dr.data_ptr() : nullptr;
    a.r = stored.data_ptr();
    a.mean = saved[1].data_ptr<float>();
    a.rstd = saved[2].data_ptr<float>();
    a.w = saved[3].data_ptr<float>();
    if (from_y) {
      a.y = saved[4].data_ptr();
      a.b = saved[5].data_ptr<float>();
    }
    a.dx = dx.data_ptr();
    a.ddelta = separate ? ddelta.data_ptr() : nullptr;
    a.dw = dw.data_ptr<float>();
    a.db = db.data_ptr<float>();
    a.dsum = lnb ? dsum.data_ptr<float>() : nullptr;
    a.scratch = scratch.data_ptr<float>();
    CS_KERNEL(stored, "add_layer_norm backward kernel", layer_norm_bwd, a,
              glue::dtype(r_dtype), glue::dtype(delta_dtype), glue::dtype(out), rows, C);
    const auto w_dtype = at::ScalarType(ctx->saved_data["w_dtype"].toInt());
    const auto b_dtype = at::ScalarType(ctx->saved_data["b_dtype"].toInt());
    torch::Tensor gdelta, glin;
    if (has_delta) gdelta = separate ? ddelta : dx;
    if (lnb) glin = dsum.to(at::ScalarType(ctx->saved_data["lin_bias_dtype"].toInt()));
    return {dx,
            gdelta,
            dw.to(w_dtype),
            db.to(b_dtype),
            glin,
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

namespace {

// Whether the kernel takes x with a delta of dtype td (x's own where there is
// none), output dtype out.
bool fused_for(const torch::Tensor& x, at::ScalarType td, at::ScalarType out) {
  if (!kernels::enabled("ln") || !glue::runs_here(x) || x.dim() < 1 || x.numel() == 0) return false;
  if (!glue::has_dtype(x.scalar_type()) || !glue::has_dtype(td) || !glue::has_dtype(out)) return false;
  return CS_KERNEL_FACT(x, layer_norm_supports, x.size(-1)) &&
         CS_KERNEL_FACT(x, layer_norm_dtypes, glue::dtype(x.scalar_type()), glue::dtype(td),
                        glue::dtype(out));
}

}  // namespace

bool add_layer_norm_fused(const torch::Tensor& x, const torch::Tensor& delta, at::ScalarType out) {
  if (delta.defined() && (delta.device() != x.device() || delta.sizes() != x.sizes())) return false;
  return fused_for(x, delta.defined() ? delta.scalar_type() : x.scalar_type(), out);
}

namespace {

// AddLayerNorm's twin flag: y twice where "res" is on.
bool twins_on(bool twin) { return twin && kernels::enabled("res"); }

// add_layer_norm, y once or twice ({r, y} or {r, y, y2}); keep_r false (a
// caller that uses y only): {y} or {y, y2} where "lny" is on, r stored only in
// the columns kern::ln_keeps_r picks.
std::vector<torch::Tensor> run(const torch::Tensor& x, const torch::Tensor& delta,
                               const torch::Tensor& weight, const torch::Tensor& bias, double eps,
                               at::ScalarType out, bool twin, bool keep_r) {
  if (add_layer_norm_fused(x, delta, out)) {
    const bool lny = !keep_r && kernels::enabled("lny");
    auto o = AddLayerNorm::apply(x, delta.defined() ? delta : torch::empty({0}, x.options()),
                                 weight, bias, torch::empty({0}, x.options()), eps, int64_t(out),
                                 twins_on(twin), !lny);
    if (lny) o.insert(o.begin(), torch::Tensor());  // {r (none), y, y2?}
    return o;
  }
  auto o = portable(x, delta, weight, bias, eps, out);
  return {o.r, o.y};
}

// {y, y2}: y twice, or the one y twice.
std::pair<torch::Tensor, torch::Tensor> twins(const std::vector<torch::Tensor>& o) {
  return {o[1], o.size() > 2 ? o[2] : o[1]};
}

}  // namespace

AddNorm add_layer_norm(const torch::Tensor& x, const torch::Tensor& delta,
                       const torch::Tensor& weight, const torch::Tensor& bias, double eps,
                       at::ScalarType out) {
  auto o = run(x, delta, weight, bias, eps, out, false, true);
  return {o[0], o[1]};
}

std::pair<torch::Tensor, torch::Tensor> add_layer_norm_twin(const torch::Tensor& x,
                                                            const torch::Tensor& delta,
                                                            const torch::Tensor& weight,
                                                            const torch::Tensor& bias, double eps,
                                                            at::ScalarType out) {
  return twins(run(x, delta, weight, bias, eps, out, true, false));
}

bool linear_add_layer_norm_fused(const torch::Tensor& x, const torch::Tensor& x_lin,
                                 const torch::Tensor& lin_weight, at::ScalarType out) {
  if (!kernels::enabled("lnb") || !linear_act_fused(x_lin, lin_weight) ||
      fp8::active(x_lin, lin_weight))
    return false;
  // delta = the linear's output: x's shape, on x_lin's device, in the autocast dtype.
  if (x_lin.dim() != x.dim() || x_lin.device() != x.device() || lin_weight.size(0) != x.size(-1) ||
      x_lin.sizes().slice(0, x.dim() - 1) != x.sizes().slice(0, x.dim() - 1))
    return false;
  return fused_for(x, compat::autocast_dtype(x_lin.device().type()), out);
}

std::pair<torch::Tensor, torch::Tensor> linear_add_layer_norm_twin(
    const torch::Tensor& x, const torch::Tensor& x_lin, const torch::Tensor& lin_weight,
    const torch::Tensor& lin_bias, const torch::Tensor& weight, const torch::Tensor& bias,
    double eps, at::ScalarType out) {
  if (!linear_add_layer_norm_fused(x, x_lin, lin_weight, out))
    return add_layer_norm_twin(x, linear_act(x_lin, lin_weight, lin_bias, Act::None), weight, bias,
                               eps, out);
  auto delta = linear_bias_grad_elsewhere(x_lin, lin_weight, lin_bias);
  const bool lny = kernels::enabled("lny");
  auto o = AddLayerNorm::apply(x, delta, weight, bias, lin_bias, eps, int64_t(out), twins_on(true),
                               !lny);
  if (lny) o.insert(o.begin(), torch::Tensor());
  return twins(o);
}

}  // namespace cs
