// fp8_linear.cpp: see fp8_linear.h. Self-contained: everything FP8 is here,
// the CUDA part under CS_HAS_SCALED_MM (a CUDA libtorch ≥ 2.5, and the build's
// CS_WITH_FP8, on by default: cmake -DCS_WITH_FP8=OFF leaves it out).
#include "fp8_linear.h"

#include <cmath>
#include <limits>

#include "compat.h"
#include "model.h"  // UnsupportedError

#ifdef CS_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

// at::_scaled_mm(mat1, mat2, scale_a, scale_b, bias, scale_result, out_dtype,
// use_fast_accum) returning one tensor, with row-wise scales: libtorch 2.5.
#if defined(CS_WITH_CUDA) && defined(CS_WITH_FP8) && CS_TORCH_AT_LEAST(2, 5)
#define CS_HAS_SCALED_MM 1
#else
#define CS_HAS_SCALED_MM 0
#endif

namespace cs {
namespace fp8 {
namespace {

thread_local bool t_on = false;
Options g_opts;  // configure(): set once at init, before any step

}  // namespace

Options options(const std::string& scaling, const std::string& grad) {
  Options o;
  o.scaling = scaling == "row" ? Scaling::Row : Scaling::Tensor;
  o.grad_e4m3 = grad == "e4m3";
  return o;
}

std::string unsupported_reason(const torch::Device& d) {
  const std::string what =
      "precision fp8 runs the linear layers' matmuls on FP8 tensor cores, which need a CUDA GPU of "
      "compute capability 8.9 or more (Ada, Hopper, Blackwell)";
  if (!d.is_cuda()) return what + "; device is " + d.str() + ": use precision bf16";
#if !CS_HAS_SCALED_MM
  return what + " and libtorch's scaled matmul (at::_scaled_mm: a CUDA libtorch 2.5 or newer, the "
                "engine built with CS_WITH_FP8); this engine was built against libtorch " +
         compat::torch_version() + " without it: use precision bf16";
#else
  const auto* p = at::cuda::getDeviceProperties(d.has_index() ? d.index() : c10::cuda::current_device());
  if (p->major * 10 + p->minor < 89)
    return what + "; " + std::string(p->name) + " is compute capability " +
           std::to_string(p->major) + "." + std::to_string(p->minor) + ": use precision bf16";
  return "";
#endif
}

void configure(const Options& o) { g_opts = o; }

Scope::Scope() : prev_on_(t_on) { t_on = true; }

Scope::~Scope() { t_on = prev_on_; }

const Options& current() { return g_opts; }

bool on() { return t_on; }

bool active(const torch::Tensor& x, const torch::Tensor& weight) {
  if (!CS_HAS_SCALED_MM || !t_on || !x.defined() || !x.is_cuda() || x.dim() < 1 ||
      x.numel() == 0 || weight.dim() != 2 || weight.device() != x.device())
    return false;
  const int64_t out = weight.size(0), in = weight.size(1);
  return x.size(-1) == in && in % 16 == 0 && out % 16 == 0 && (x.numel() / in) % 16 == 0;
}

#if CS_HAS_SCALED_MM
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr double kE4M3Max = 448.0;    // largest finite float8_e4m3fn
constexpr double kE5M2Max = 57344.0;  // largest finite float8_e5m2

// A 2-D tensor in FP8 and its dequantization scale (float32): t ≈ q * inv,
// inv [1, 1] (per tensor), [rows, 1] (per row) or [1, cols] (per column).
struct Quant {
  torch::Tensor q, inv;
};

enum class Axis { Tensor, Rows, Cols };

// Dynamic scaling: the amax of t (over all of it, each row or each column)
// maps to the format's largest finite value. |t * scale| ≤ max up to float
// rounding, which the conversion rounds back to max (no saturation needed);
// an inf or nan in t gives nan, which the loss then shows.
Quant quantize(const torch::Tensor& t, at::ScalarType dt, Axis axis) {
  const double fmax = dt == at::kFloat8_e4m3fn ? kE4M3Max : kE5M2Max;
  std::vector<int64_t> dims;
  if (axis == Axis::Tensor) dims = {0, 1};
  if (axis == Axis::Rows) dims = {1};
  if (axis == Axis::Cols) dims = {0};
  // max |t| in one reduction, in fp32, kept 2-D ([1, 1], [rows, 1] or [1, cols]).
  auto amax = at::linalg_vector_norm(t, std::numeric_limits<double>::infinity(), c10::IntArrayRef(dims),
                                     /*keepdim=*/true, at::kFloat)
                  .clamp_min_(1e-12);
  auto scale = at::reciprocal(amax).mul_(fmax);
  // bf16 or fp32 times a 2-D fp32 tensor computes in fp32; then one rounding to
  // FP8, row-major (mul keeps a permuted input's strides).
  return {t.mul(scale).to(dt).contiguous(), amax.div_(fmax)};
}

// _scaled_mm's layout: mat1 row-major, mat2 column-major (cuBLASLt's FP8
// "TN"); m.t().contiguous().t() is m's values with column-major strides.
torch::Tensor col_major(const torch::Tensor& m) { return m.t().contiguous().t(); }

torch::Tensor scaled_mm(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& sa,
                        const torch::Tensor& sb, const torch::Tensor& bias, at::ScalarType out,
                        bool fast_accum) {
  return at::_scaled_mm(a, b, sa, sb,
                        bias.defined() ? std::optional<torch::Tensor>(bias) : std::nullopt,
                        std::nullopt, out, fast_accum);
}

// flags: bit 0 row scaling, bit 1 gradients in e4m3.
struct Fp8Linear : torch::autograd::Function<Fp8Linear> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, const torch::Tensor& bias,
                               int64_t flags) {
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCUDA);
    const bool row = flags & 1;
    const int64_t out = weight.size(0), in = weight.size(1);
    auto x2 = x.reshape({-1, in});
    const Axis ax = row ? Axis::Rows : Axis::Tensor;
    auto xq = quantize(x2, at::kFloat8_e4m3fn, ax);      // [M, in], inv [M, 1] or [1, 1]
    auto wq = quantize(weight, at::kFloat8_e4m3fn, ax);  // [out, in], inv [out, 1] or [1, 1]
    // y [M, out] = x W^T: mat2 W^T [in, out] is wq.q.t(), column-major as it is.
    auto b = bias.defined() ? bias.to(at::kBFloat16) : torch::Tensor();
    // scale_b: [1, 1], or W^T's columns' [1, out].
    auto y = scaled_mm(xq.q, wq.q.t(), xq.inv, row ? wq.inv.reshape({1, out}) : wq.inv, b,
                       at::kBFloat16, /*fast_accum=*/true);
    if (row) {
      // The backward scales along the other axis: it quantizes again from these.
      ctx->save_for_backward({x2, weight});
    } else {
      // Per tensor, the forward's FP8 operands serve the backward too (saved in
      // one byte per value instead of bf16's two).
      ctx->save_for_backward({xq.q, xq.inv, wq.q, wq.inv});
    }
    ctx->saved_data["flags"] = flags;
    ctx->saved_data["x_dtype"] = int64_t(x.scalar_type());
    ctx->saved_data["w_dtype"] = int64_t(weight.scalar_type());
    ctx->saved_data["b_dtype"] = int64_t(bias.defined() ? bias.scalar_type() : at::kFloat);
    ctx->saved_data["has_bias"] = bias.defined();
    auto shape = x.sizes().vec();
    shape.back() = out;
    return at::_unsafe_view(y, shape);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCUDA);
    const int64_t flags = ctx->saved_data["flags"].toInt();
    const bool row = flags & 1;
    const auto gdt = (flags & 2) ? at::kFloat8_e4m3fn : at::kFloat8_e5m2;
    const auto x_dtype = at::ScalarType(ctx->saved_data["x_dtype"].toInt());
    const auto w_dtype = at::ScalarType(ctx->saved_data["w_dtype"].toInt());
    auto saved = ctx->get_saved_variables();
    const int64_t out = row ? saved[1].size(0) : saved[2].size(0);
    const int64_t in = row ? saved[1].size(1) : saved[2].size(1);
    auto dy = grads[0].reshape({-1, out}).contiguous();  // [M, out]
    torch::Tensor dx, dw, db;
    if (ctx->saved_data["has_bias"].toBool())
      db = dy.sum(0, false, at::kFloat).to(at::ScalarType(ctx->saved_data["b_dtype"].toInt()));
    auto dx_shape = grads[0].sizes().vec();
    dx_shape.back() = in;
    if (!row) {
      auto xq = saved[0], x_inv = saved[1], wq = saved[2], w_inv = saved[3];
      auto g = quantize(dy, gdt, Axis::Tensor);
      // dX [M, in] = dY [M, out] W [out, in].
      if (ctx->needs_input_grad(0))
        dx = scaled_mm(g.q, col_major(wq), g.inv, w_inv, {}, at::kBFloat16, false);
      // dW [out, in] = dY^T [out, M] X [M, in].
      if (ctx->needs_input_grad(1))
        dw = scaled_mm(g.q.t().contiguous(), col_major(xq), g.inv, x_inv, {}, at::kFloat, false);
    } else {
      auto x2 = saved[0], weight = saved[1];
      // Row-wise scales lie along the dimensions that are not summed over.
      if (ctx->needs_input_grad(0)) {
        // dX: summed over out. dY per row [M, 1]; W per column [1, in].
        auto g = quantize(dy, gdt, Axis::Rows);
        auto w = quantize(weight, at::kFloat8_e4m3fn, Axis::Cols);
        dx = scaled_mm(g.q, col_major(w.q), g.inv, w.inv, {}, at::kBFloat16, false);
      }
      if (ctx->needs_input_grad(1)) {
        // dW: summed over M. dY per column (rows of dY^T) [out, 1]; X per column [1, in].
        auto g = quantize(dy, gdt, Axis::Cols);
        auto xc = quantize(x2, at::kFloat8_e4m3fn, Axis::Cols);
        dw = scaled_mm(g.q.t().contiguous(), col_major(xc.q), g.inv.reshape({out, 1}), xc.inv, {},
                       at::kFloat, false);
      }
    }
    if (dx.defined()) dx = dx.to(x_dtype).view(dx_shape);
    if (dw.defined()) dw = dw.to(w_dtype);
    return {dx, dw, db, torch::Tensor()};
  }
};

}  // namespace
#endif  // CS_HAS_SCALED_MM

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight,
                     const torch::Tensor& bias, const Options& o) {
  if (!x.is_cuda()) throw UnsupportedError(unsupported_reason(x.device()));
#if CS_HAS_SCALED_MM
  const int64_t flags = (o.scaling == Scaling::Row ? 1 : 0) | (o.grad_e4m3 ? 2 : 0);
  return Fp8Linear::apply(x, weight, bias, flags);
#else
  throw UnsupportedError(unsupported_reason(x.device()));
#endif
}

}  // namespace fp8
}  // namespace cs
