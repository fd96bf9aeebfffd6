// fp8_linear.cpp: see fp8_linear.h. Self-contained: everything FP8 is here,
// the CUDA part under CS_HAS_SCALED_MM (a CUDA libtorch ≥ 2.5, and the build's
// CS_WITH_FP8, on by default: cmake -DCS_WITH_FP8=OFF leaves it out).
#include "fp8_linear.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <sstream>

#include "compat.h"
#include "fp8_diag.h"
#include "kernels.h"
#include "kernels_glue.h"
#include "model.h"  // UnsupportedError

#ifdef CS_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
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

// Diagnostics of the per-tensor e5m2 divergence (fp8_diag.h lists them:
// CASESTUDY_FP8_AUDIT, CASESTUDY_FP8_AUDIT_EVERY, CASESTUDY_FP8_E5M2_GEMM,
// CASESTUDY_FP8_BWD, CASESTUDY_FP8_GRAD_AXIS, CASESTUDY_FP8_GRAD_DECORRELATE,
// CASESTUDY_FP8_E5M2_FOR; docs/engine.md), from the environment at
// configure(). All off by default; off, the forward and the backward run
// exactly as without them.
diag::Settings g_diag;
std::atomic<int64_t> g_audit_left{0};  // what is left of CASESTUDY_FP8_AUDIT's passes
std::atomic<int64_t> g_forwards{0};    // outermost Scopes so far (forward passes)

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

void configure(const Options& o) {
  g_opts = o;
  g_diag = diag::from_env();
  g_audit_left = g_diag.audit_first;
}

Scope::Scope() : prev_on_(t_on) {
  if (!prev_on_ && g_diag.any()) g_forwards.fetch_add(1, std::memory_order_relaxed);  // only the diagnostics read it
  t_on = true;
}

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

constexpr double kE4M3Max = 448.0;    // largest finite float8_e4m3fn
constexpr double kE5M2Max = 57344.0;  // largest finite float8_e5m2

// The recipe in ATen ops (the fallback of the fp8cast kernels, and their
// tests' reference): the amax of t (over all of it, each row or each column)
// maps to the format's largest finite value. |t * scale| <= max up to float
// rounding, which the conversion rounds back to max (no saturation needed);
// an inf or nan in t gives nan, which the loss then shows. Four passes over
// t or more (the amax, t * scale in fp32, the cast, the transposing copy).
Quantized quantize_aten(const torch::Tensor& t, at::ScalarType dt, Axis axis, bool want_q,
                        bool want_qt) {
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
  auto q = t.mul(scale).to(dt).contiguous();
  Quantized out;
  if (want_qt) out.qt = q.t().contiguous();
  if (want_q) out.q = q;
  out.inv = amax.div_(fmax);
  return out;
}

#ifdef CS_WITH_KERNELS
// The same with the fp8cast kernels (cuda/fp8_cast.cu): one read of t for the
// amax, one for the cast writing q, qt or both; the scale stays on the device.
Quantized quantize_fused(const torch::Tensor& t, at::ScalarType dt, Axis axis, bool want_q,
                         bool want_qt) {
  auto tc = t.contiguous();
  const int64_t rows = tc.size(0), cols = tc.size(1);
  const auto f32 = tc.options().dtype(at::kFloat);
  const auto ax = cuda::Fp8Axis(int(axis));
  const int64_t n = axis == Axis::Rows ? rows : axis == Axis::Cols ? cols : 1;
  auto amax = torch::empty({n}, f32);
  Quantized out;
  out.inv = axis == Axis::Rows   ? torch::empty({rows, 1}, f32)
            : axis == Axis::Cols ? torch::empty({1, cols}, f32)
                                 : torch::empty({1, 1}, f32);
  if (want_q) out.q = torch::empty({rows, cols}, tc.options().dtype(dt));
  if (want_qt) out.qt = torch::empty({cols, rows}, tc.options().dtype(dt));
  const auto st = glue::stream();
  const auto t_dt = glue::dtype(tc.scalar_type());
  glue::check(cuda::fp8_amax(tc.data_ptr(), t_dt, rows, cols, ax, amax.data_ptr<float>(), st),
              "fp8 amax kernel (CASESTUDY_KERNELS=-fp8cast: ATen ops instead)");
  glue::check(cuda::fp8_cast(tc.data_ptr(), t_dt, rows, cols, ax, amax.data_ptr<float>(),
                             dt == at::kFloat8_e5m2 ? cuda::Fp8Format::E5M2 : cuda::Fp8Format::E4M3,
                             want_q ? static_cast<uint8_t*>(out.q.data_ptr()) : nullptr,
                             want_qt ? static_cast<uint8_t*>(out.qt.data_ptr()) : nullptr,
                             out.inv.data_ptr<float>(), st),
              "fp8 cast kernel (CASESTUDY_KERNELS=-fp8cast: ATen ops instead)");
  return out;
}
#endif

}  // namespace

bool fused_quantize(const torch::Tensor& t) {
#ifdef CS_WITH_KERNELS
  return kernels::enabled("fp8cast") && t.defined() && t.is_cuda() && t.dim() == 2 &&
         glue::has_dtype(t.scalar_type());
#else
  (void)t;
  return false;
#endif
}

Quantized quantize(const torch::Tensor& t, bool e5m2, Axis axis, bool want_q, bool want_qt) {
  TORCH_CHECK(t.dim() == 2, "fp8::quantize: a 2-D tensor, got ", t.dim(), " dimensions");
  const auto dt = e5m2 ? at::kFloat8_e5m2 : at::kFloat8_e4m3fn;
#ifdef CS_WITH_KERNELS
  if (fused_quantize(t)) return quantize_fused(t, dt, axis, want_q, want_qt);
#endif
  return quantize_aten(t, dt, axis, want_q, want_qt);
}

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

const char* approximation(kern::Act act) { return act == kern::Act::GeluTanh ? "tanh" : "none"; }

torch::Tensor scaled_mm(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& sa,
                        const torch::Tensor& sb, const torch::Tensor& bias, at::ScalarType out,
                        bool fast_accum) {
  if (g_diag.e5m2_rowwise && sa.numel() == 1 && sb.numel() == 1 &&
      (a.scalar_type() == at::kFloat8_e5m2 || b.scalar_type() == at::kFloat8_e5m2))
    return at::_scaled_mm(a, b, sa.reshape({1, 1}).expand({a.size(0), 1}).contiguous(),
                          sb.reshape({1, 1}).expand({1, b.size(1)}).contiguous(),
                          bias.defined() ? std::optional<torch::Tensor>(bias) : std::nullopt,
                          std::nullopt, out, fast_accum);
  return at::_scaled_mm(a, b, sa, sb,
                        bias.defined() ? std::optional<torch::Tensor>(bias) : std::nullopt,
                        std::nullopt, out, fast_accum);
}

// One product of the backward, a [m, k] (FP8, row-major, scales sa) times b
// [k, n] (FP8, column-major, scales sb), as CASESTUDY_FP8_BWD says: the scaled
// GEMM (the recipe), the dequantized operands in fp32 (emulate), a's FP8 values
// times b_hp, b unquantized (qdq), or a_hp times b_hp (exact).
torch::Tensor bwd_product(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& sa,
                          const torch::Tensor& sb, at::ScalarType out, const torch::Tensor& a_hp,
                          const torch::Tensor& b_hp) {
  switch (g_diag.bwd) {
    case diag::Bwd::Emulate: return diag::dequant_mm(a, sa, b, sb).to(out);
    case diag::Bwd::Qdq: return diag::dequant_mm(a, sa, b_hp, {}).to(out);
    case diag::Bwd::Exact: return at::mm(a_hp.to(at::kFloat), b_hp.to(at::kFloat)).to(out);
    default: return scaled_mm(a, b, sa, sb, {}, out, false);
  }
}

// CASESTUDY_FP8_GRAD_DECORRELATE: dW's copy of dz per tensor with its amax
// mapped to 0.75 fmax instead of fmax (ATen ops), so that its rounding grid
// lies log2(4/3) binades off dX's copy's and the two products' rounding
// errors are nearly independent, as per row (two casts) and unlike per tensor
// (one cast). qt only (dW's operand), inv [1, 1].
Quantized quantize_shifted(const torch::Tensor& t, bool e5m2) {
  const auto dt = e5m2 ? at::kFloat8_e5m2 : at::kFloat8_e4m3fn;
  const double fmax = (e5m2 ? kE5M2Max : kE4M3Max) * 0.75;
  auto amax = t.abs().amax().to(at::kFloat).clamp_min(1e-12).reshape({1, 1});
  auto scale = at::reciprocal(amax).mul_(fmax);
  Quantized out;
  out.qt = t.mul(scale).to(dt).t().contiguous();
  out.inv = amax.div_(fmax);
  return out;
}

// Whether the forward pass fwd (g_forwards' count at its Scope) is one that
// CASESTUDY_FP8_AUDIT_EVERY audits.
bool audit_period(int64_t fwd) {
  return g_diag.audit_every > 0 && fwd >= 0 && fwd % g_diag.audit_every == 0;
}

// Whether this backward pass is audited (CASESTUDY_FP8_AUDIT or _EVERY),
// never while the stream is being captured (the audit reads values back).
bool audit_now(const torch::Tensor& t, int64_t fwd) {
  const bool period = audit_period(fwd);
  if (!period && g_audit_left.load() <= 0) return false;
  if (t.is_cuda() && c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None)
    return false;
  return period || g_audit_left.fetch_sub(1) > 0;
}

void print_audit(const std::string& line) { std::cerr << line << std::endl; }

std::atomic<int64_t> g_audit_index{0};  // audit lines so far

const char* fmt(bool e5m2) { return e5m2 ? "e5m2" : "e4m3"; }

// _scaled_mm's layout: mat1 row-major, mat2 column-major (cuBLASLt's FP8
// "TN"). A matrix's column-major copy is its transpose's row-major one: qt.t().
// flags: bit 0 row scaling, bit 1 gradients in e4m3, bit 2 a bias (without
// one, `bias` is an empty placeholder: a custom function refuses an undefined
// input, "tensor does not have a device", as linear_ce.cpp notes of 1.13); act: the activation
// after the product (kern::Act), its backward fused with the bias gradient.
struct Fp8Linear : torch::autograd::Function<Fp8Linear> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, const torch::Tensor& bias,
                               int64_t flags, int64_t act_code) {
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCUDA);
    const bool row = flags & 1, has_bias = flags & 4;
    const auto act = kern::Act(act_code);
    const int64_t out = weight.size(0), in = weight.size(1);
    auto x2 = x.reshape({-1, in});
    auto b = has_bias ? bias.to(at::kBFloat16) : torch::Tensor();
    torch::Tensor z;
    if (!row) {
      // Per tensor, one cast of each operand writes it row-major for this
      // product and transposed for the backward's (saved in one byte per value
      // instead of bf16's two).
      auto xq = quantize(x2, false, Axis::Tensor, true, true);      // [M, in], [in, M]; inv [1, 1]
      auto wq = quantize(weight, false, Axis::Tensor, true, true);  // [out, in], [in, out]
      // z [M, out] = x W^T: mat2 W^T [in, out] is wq.q.t(), column-major as it is.
      z = scaled_mm(xq.q, wq.q.t(), xq.inv, wq.inv, b, at::kBFloat16, /*fast_accum=*/true);
      ctx->save_for_backward({xq.qt, xq.inv, wq.qt, wq.inv, act == kern::Act::None ? torch::Tensor() : z});
      if (g_diag.any()) {
        // The unquantized operands, for the audit's exact products and the
        // qdq and exact backward (diagnostics only).
        const int64_t fwd = g_forwards.load() - 1;
        ctx->saved_data["diag_fwd"] = fwd;
        if (g_audit_left.load() > 0 || audit_period(fwd) || g_diag.bwd == diag::Bwd::Qdq ||
            g_diag.bwd == diag::Bwd::Exact) {
          ctx->saved_data["diag_x"] = x2;
          ctx->saved_data["diag_w"] = weight;
        }
      }
    } else {
      auto xq = quantize(x2, false, Axis::Rows, true, false);      // inv [M, 1]
      auto wq = quantize(weight, false, Axis::Rows, true, false);  // inv [out, 1]
      // scale_b: W^T's columns' [1, out].
      z = scaled_mm(xq.q, wq.q.t(), xq.inv, wq.inv.reshape({1, out}), b, at::kBFloat16,
                    /*fast_accum=*/true);
      // The backward scales along the other axis: it quantizes again from these.
      ctx->save_for_backward({x2, weight, act == kern::Act::None ? torch::Tensor() : z});
      if (g_diag.any()) ctx->saved_data["diag_fwd"] = g_forwards.load() - 1;
    }
    ctx->saved_data["flags"] = flags;
    ctx->saved_data["act"] = act_code;
    ctx->saved_data["out"] = out;
    ctx->saved_data["in"] = in;
    ctx->saved_data["x_dtype"] = int64_t(x.scalar_type());
    ctx->saved_data["w_dtype"] = int64_t(weight.scalar_type());
    ctx->saved_data["b_dtype"] = int64_t(has_bias ? bias.scalar_type() : at::kFloat);
    ctx->saved_data["has_bias"] = has_bias;
    auto y = act == kern::Act::None ? z : torch::gelu(z, approximation(act));
    auto shape = x.sizes().vec();
    shape.back() = out;
    // Not a view (a custom function's view output could not be modified in place).
    return at::_unsafe_view(y, shape);
  }

  // dz = dy act'(z) and the bias gradient (fp32): the "lin" kernel in one pass
  // where it runs, else ATen's GELU backward and a column sum.
  static std::pair<torch::Tensor, torch::Tensor> bias_act_grads(const torch::Tensor& dy,
                                                                const torch::Tensor& z,
                                                                kern::Act act) {
    const int64_t rows = dy.size(0), out = dy.size(1);
    if (kernels::enabled("lin") && glue::runs_here(dy)) {
      auto db = torch::empty({out}, dy.options().dtype(torch::kFloat32));
      auto dz = act == kern::Act::None ? dy : torch::empty_like(dy);
      auto scratch = torch::empty({CS_KERNEL_FACT(dy, bias_act_bwd_scratch, rows, out)},
                                  dy.options().dtype(torch::kFloat32));
      CS_KERNEL(dy, "fp8 linear layer bias (+ GELU) backward kernel", bias_act_bwd, dy.data_ptr(),
                act == kern::Act::None ? nullptr : z.data_ptr(),
                act == kern::Act::None ? nullptr : dz.data_ptr(), db.data_ptr<float>(),
                scratch.data_ptr<float>(), glue::dtype(dy.scalar_type()), act, rows, out);
      return {dz, db};
    }
    auto dz = act == kern::Act::None ? dy : at::gelu_backward(dy, z, approximation(act));
    return {dz, dz.sum(0, false, at::kFloat)};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCUDA);
    const int64_t flags = ctx->saved_data["flags"].toInt();
    const bool row = flags & 1, g_e5m2 = !(flags & 2);
    const auto act = kern::Act(ctx->saved_data["act"].toInt());
    const int64_t out = ctx->saved_data["out"].toInt(), in = ctx->saved_data["in"].toInt();
    const auto x_dtype = at::ScalarType(ctx->saved_data["x_dtype"].toInt());
    const auto w_dtype = at::ScalarType(ctx->saved_data["w_dtype"].toInt());
    auto saved = ctx->get_saved_variables();
    // [M, out] in the forward's output dtype (bf16), as the "lin" kernel takes it.
    auto dy = grads[0].reshape({-1, out}).to(at::kBFloat16).contiguous();
    auto [dz, db] = bias_act_grads(dy, row ? saved[2] : saved[4], act);
    if (ctx->saved_data["has_bias"].toBool())
      db = db.to(at::ScalarType(ctx->saved_data["b_dtype"].toInt()));
    else
      db = torch::Tensor();
    torch::Tensor dx, dw;
    auto dx_shape = grads[0].sizes().vec();
    dx_shape.back() = in;
    const bool nx = ctx->needs_input_grad(0), nw = ctx->needs_input_grad(1);
    // The gradient's format of each product: fp8.grad's, unless
    // CASESTUDY_FP8_E5M2_FOR leaves this product or layer kind to e4m3.
    const auto kind = diag::kind_of(in, out);
    const bool ex = g_e5m2 && diag::e5m2_for(g_diag, 0, kind), ew = g_e5m2 && diag::e5m2_for(g_diag, 1, kind);
    const auto fwd_it = ctx->saved_data.find("diag_fwd");
    const int64_t fwd = fwd_it == ctx->saved_data.end() ? -1 : fwd_it->second.toInt();
    const bool audited = fwd_it != ctx->saved_data.end() && audit_now(dz, fwd);
    // The audit's exact operands, and the qdq and exact backward's (diagnostics).
    torch::Tensor x_hp, w_hp;
    if (!row) {
      auto xqt = saved[0], x_inv = saved[1], wqt = saved[2], w_inv = saved[3];
      if (ctx->saved_data.find("diag_x") != ctx->saved_data.end()) {
        x_hp = ctx->saved_data["diag_x"].toTensor();
        w_hp = ctx->saved_data["diag_w"].toTensor();
      }
      // dZ row-major for dX, transposed for dW, from one cast (two where the
      // products' formats differ, or CASESTUDY_FP8_GRAD_AXIS=row scales dZ per
      // row for dX and per column for dW, W's and X's scalar scales then
      // expanded to the row-wise GEMM's vectors).
      Quantized gx, gw;
      if (g_diag.grad_rows) {
        if (nx) gx = quantize(dz, ex, Axis::Rows, true, false);  // inv [M, 1]
        if (nw) {
          gw = quantize(dz, ew, Axis::Cols, false, true);  // inv [1, out] -> [out, 1]
          gw.inv = gw.inv.reshape({out, 1});
        }
        w_inv = w_inv.reshape({1, 1}).expand({1, in}).contiguous();
        x_inv = x_inv.reshape({1, 1}).expand({1, in}).contiguous();
      } else if (nx && nw && g_diag.decorrelate) {
        gx = quantize(dz, ex, Axis::Tensor, true, false);
        gw = quantize_shifted(dz, ew);
      } else if (nx && nw && ex != ew) {
        gx = quantize(dz, ex, Axis::Tensor, true, false);
        gw = quantize(dz, ew, Axis::Tensor, false, true);
      } else {
        gx = quantize(dz, nx ? ex : ew, Axis::Tensor, nx, nw);
        gw = gx;
      }
      // dX [M, in] = dZ [M, out] W [out, in]: W column-major is wqt.t().
      if (nx) dx = bwd_product(gx.q, wqt.t(), gx.inv, w_inv, at::kBFloat16, dz, w_hp);
      // dW [out, in] = dZ^T [out, M] X [M, in]: X column-major is xqt.t().
      if (nw) dw = bwd_product(gw.qt, xqt.t(), gw.inv, x_inv, at::kFloat, dz.t(), x_hp);
      if (audited && x_hp.defined()) {
        auto dzf = dz.to(at::kFloat);
        const bool q_mode = g_diag.bwd == diag::Bwd::Qdq, e_mode = g_diag.bwd == diag::Bwd::Exact;
        print_audit(diag::audit_line(
            g_audit_index++, fwd, kind, in, false, fmt(ex), fmt(ew), g_diag, dz, nx ? gx.q : gw.qt.t(),
            nx ? gx.inv : gw.inv.reshape({1, -1}), x_hp, w_hp,
            {{"dx", dx, e_mode ? dz : gx.q, q_mode || e_mode ? w_hp : wqt.t(), e_mode ? torch::ones({1, 1}, dzf.options()) : gx.inv,
              q_mode || e_mode ? torch::Tensor() : w_inv, dx.defined() ? at::mm(dzf, w_hp.to(at::kFloat)) : torch::Tensor()},
             {"dw", dw, e_mode ? dz.t() : gw.qt, q_mode || e_mode ? x_hp : xqt.t(),
              e_mode ? torch::ones({1, 1}, dzf.options()) : gw.inv, q_mode || e_mode ? torch::Tensor() : x_inv,
              dw.defined() ? at::mm(dzf.t(), x_hp.to(at::kFloat)) : torch::Tensor()}}));
      }
    } else {
      auto x2 = saved[0], weight = saved[1];
      Quantized gr, wc, gc, xc;
      // Row-wise scales lie along the dimensions that are not summed over.
      if (nx) {
        // dX: summed over out. dZ per row [M, 1]; W per column [1, in], column-major.
        gr = quantize(dz, ex, Axis::Rows, true, false);
        wc = quantize(weight, false, Axis::Cols, false, true);
        dx = bwd_product(gr.q, wc.qt.t(), gr.inv, wc.inv, at::kBFloat16, dz, weight);
      }
      if (nw) {
        // dW: summed over M. dZ per column (rows of dZ^T) [out, 1]; X per column [1, in].
        gc = quantize(dz, ew, Axis::Cols, false, true);
        xc = quantize(x2, false, Axis::Cols, false, true);
        dw = bwd_product(gc.qt, xc.qt.t(), gc.inv.reshape({out, 1}), xc.inv, at::kFloat, dz.t(), x2);
      }
      if (audited) {
        auto dzf = dz.to(at::kFloat);
        const bool hp = g_diag.bwd == diag::Bwd::Qdq || g_diag.bwd == diag::Bwd::Exact;
        const bool e_mode = g_diag.bwd == diag::Bwd::Exact;
        auto one = torch::ones({1, 1}, dzf.options());
        print_audit(diag::audit_line(
            g_audit_index++, fwd, kind, in, true, fmt(ex), fmt(ew), g_diag, dz, nx ? gr.q : gc.qt.t(),
            nx ? gr.inv : gc.inv, x2, weight,
            {{"dx", dx, e_mode ? dz : gr.q, nx ? (hp ? weight : wc.qt.t()) : torch::Tensor(),
              e_mode ? one : gr.inv, hp ? torch::Tensor() : wc.inv,
              nx ? at::mm(dzf, weight.to(at::kFloat)) : torch::Tensor()},
             {"dw", dw, e_mode ? dz.t() : gc.qt, nw ? (hp ? x2 : xc.qt.t()) : torch::Tensor(),
              e_mode ? one : (nw ? gc.inv.reshape({out, 1}) : torch::Tensor()), hp ? torch::Tensor() : xc.inv,
              nw ? at::mm(dzf.t(), x2.to(at::kFloat)) : torch::Tensor()}}));
      }
    }
    if (dx.defined()) dx = dx.to(x_dtype).view(dx_shape);
    if (dw.defined()) dw = dw.to(w_dtype);
    return {dx, dw, db, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace
#else   // !CS_HAS_SCALED_MM
bool fused_quantize(const torch::Tensor&) { return false; }

Quantized quantize(const torch::Tensor& t, bool, Axis, bool, bool) {
  throw UnsupportedError(unsupported_reason(t.device()));
}
#endif  // CS_HAS_SCALED_MM

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight,
                     const torch::Tensor& bias, const Options& o, kern::Act act) {
  if (!x.is_cuda()) throw UnsupportedError(unsupported_reason(x.device()));
#if CS_HAS_SCALED_MM
  const int64_t flags = (o.scaling == Scaling::Row ? 1 : 0) | (o.grad_e4m3 ? 2 : 0) | (bias.defined() ? 4 : 0);
  return Fp8Linear::apply(x, weight, bias.defined() ? bias : torch::empty({0}, weight.options()), flags,
                          int64_t(act));
#else
  throw UnsupportedError(unsupported_reason(x.device()));
#endif
}

}  // namespace fp8
}  // namespace cs
