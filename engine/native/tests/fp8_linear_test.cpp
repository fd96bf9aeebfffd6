// fp8_linear_test.cpp: precision fp8's linear layer (src/fp8_linear.h).
//
// Everywhere: the refusals (check_precision and unsupported_reason on the
// CPU, fp8::linear throwing there, active() false for CPU tensors and for
// dimensions that are not multiples of 16).
//
// On a CUDA GPU of compute capability ≥ 8.9 (the FP8 path itself), for
// per-tensor and per-row scaling, e5m2 and e4m3 gradients, 2-D and 3-D
// inputs, the output and the gradients of x, weight and bias against
//  1. an emulation of the recipe: the operands quantized by the same amax
//     rule on the GPU (a cast to the FP8 type), dequantized and multiplied in
//     float64. Only the matmul's accumulation differs (fp32, fast
//     accumulation in the forward): within 1e-2 relative, far below FP8's
//     own rounding, so a wrong scale, axis, transpose or format fails here;
//  2. the exact product in float64 of the unquantized values: the error must
//     be FP8's, between 0.5% (above bf16's 0.4% rounding: FP8 really ran) and
//     6% for the e4m3 products (3 mantissa bits: a value's rounding error is
//     up to 2^-4, RMS about 2.7%; a dot product's relative error is about
//     sqrt(2) times that, 3.8%) or 10% where e5m2 (2 mantissa bits, RMS about
//     5.4%) meets e4m3 (about 6%).
// Every case runs twice: the quantization through the fp8cast kernels and
// through ATen ops (CASESTUDY_KERNELS=-fp8cast), whose results must agree to
// fp32 rounding (the same FP8 operands). The cases include GPT-2 124M's four
// layers at 16 x 1024 tokens (the shape whose training diverged per tensor on
// 2026-12-06: a product or scale that fails only at 16,384 rows fails here),
// the same at training-like values (heavy tails, outlier channels, gradients
// of 1e-11, zero rows; against the emulation only) and the MLP up-projection
// with its GELU (the activation's backward fused with the bias gradient; the
// emulation then starts from the FP8 path's own pre-activation, and the bias
// gradient is held to the emulation's at 1% and to the exact one under a
// bound derived from GELU''). And 30 Adam steps of a small MLP in FP8 (per
// tensor and row, e5m2 and e4m3 gradients) against bf16 over 3 seeds: every
// run learns and ends within 5% of bf16's loss (a bound from a measurement,
// check_training says which).
// The kernels alone: amax per tensor, row and column equal to ATen's exactly;
// the cast (q and its transpose qt) bit for bit the ATen recipe's, inv within
// an fp32 rounding, over bf16, fp16 and fp32 inputs with values across FP8's
// whole range (subnormals, zeros, an all-zero row and column), odd shapes and
// a misaligned input (the kernels' element-by-element paths).
// And linear_act under AutocastScope(fp8) runs the FP8 path (the same values
// as fp8::linear), the bf16 path where a dimension is not a multiple of 16.
#include <torch/torch.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "fp8_diag.h"
#include "fp8_linear.h"
#include "fp8_ref.h"
#include "kernels.h"
#include "linear_act.h"
#include "model.h"
#include "compat.h"
#include "native_test.h"
#include "precision.h"

// The CUDA cases need the float8 dtypes and at::_scaled_mm: a CUDA libtorch
// >= 2.5, as src/fp8_linear.cpp's CS_HAS_SCALED_MM (older ones refuse fp8).
// (-DCS_FP8_CUDA_CASES=1 forces them: scripts/cuda-syntax-check.sh's
// EXTRA_FLAGS, to compile them against older headers, float8 errors expected.)
#ifndef CS_FP8_CUDA_CASES
#if defined(CS_WITH_CUDA) && CS_TORCH_AT_LEAST(2, 5)
#define CS_FP8_CUDA_CASES 1
#else
#define CS_FP8_CUDA_CASES 0
#endif
#endif

#ifdef CS_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif
// The fp8cast kernels' launchers themselves (cuda/fp8_cast.cu), where built.
#if defined(CS_WITH_CUDA) && defined(CS_WITH_KERNELS) && defined(CS_WITH_FP8)
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "cuda/kernels_cuda.h"
#define CS_TEST_FP8CAST 1
#endif

using namespace cs;

namespace {

int cpu_checks() {
  const torch::Device cpu(torch::kCPU);
  const auto why = fp8::unsupported_reason(cpu);
  CS_CHECK(why.find("compute capability 8.9") != std::string::npos);
  CS_CHECK(why.find("device is cpu") != std::string::npos);
  bool refused = false;
  try {
    check_precision(Precision::FP8, cpu);
  } catch (const UnsupportedError& e) {
    refused = std::string(e.what()) == why;
  }
  CS_CHECK(refused);
  auto x = torch::randn({32, 64}), w = torch::randn({48, 64}), b = torch::zeros({48});
  fp8::Scope scope;
  CS_CHECK(fp8::on());
  CS_CHECK(!fp8::active(x, w));  // CPU tensors: never FP8
  refused = false;
  try {
    fp8::linear(x, w, b, fp8::Options{});
  } catch (const UnsupportedError&) {
    refused = true;
  }
  CS_CHECK(refused);
  return 0;
}

// The diagnostic switches (fp8_diag.h): parsing, the errors naming the
// variable, the layer kinds of GPT-2's shapes, the e5m2 masks, the error
// measures and the audit line, on CPU tensors (the audit's arithmetic is
// plain ATen; FP8 values enter it through .to(float)).
int diag_checks() {
  using namespace fp8::diag;
  auto env = [](std::map<std::string, std::string> m) {
    return [m](const char* name) {
      auto it = m.find(name);
      return it == m.end() ? std::string() : it->second;
    };
  };
  auto d = parse(env({}));
  CS_CHECK(!d.any() && d.bwd == Bwd::Scaled && d.audit_first == 0 && d.audit_every == 0);
  CS_CHECK(e5m2_for(d, 0, Kind::Qkv) && e5m2_for(d, 1, Kind::MlpDown));
  auto s = parse(env({{"CASESTUDY_FP8_AUDIT", "12"}, {"CASESTUDY_FP8_AUDIT_EVERY", "50"},
                      {"CASESTUDY_FP8_BWD", "qdq"}, {"CASESTUDY_FP8_E5M2_GEMM", "rowwise"},
                      {"CASESTUDY_FP8_E5M2_FOR", "dw,mlp_down,attn_out"}}));
  CS_CHECK(s.any() && s.audit_first == 12 && s.audit_every == 50 && s.bwd == Bwd::Qdq && s.e5m2_rowwise);
  CS_CHECK(!e5m2_for(s, 0, Kind::MlpDown) && e5m2_for(s, 1, Kind::MlpDown) && e5m2_for(s, 1, Kind::AttnOut));
  CS_CHECK(!e5m2_for(s, 1, Kind::Qkv) && !e5m2_for(s, 1, Kind::MlpUp));
  auto only_dx = parse(env({{"CASESTUDY_FP8_E5M2_FOR", "dx"}}));
  CS_CHECK(e5m2_for(only_dx, 0, Kind::Qkv) && !e5m2_for(only_dx, 1, Kind::Qkv) && only_dx.any());
  for (const char* b : {"scaled", "emulate", "qdq", "exact"})
    CS_CHECK(std::string(bwd_name(parse(env({{"CASESTUDY_FP8_BWD", b}})).bwd)) == b);
  // A bad value: a ConfigError naming the variable.
  auto refused = [&](const char* var, const char* value) {
    try {
      parse(env({{var, value}}));
    } catch (const ConfigError& e) {
      return std::string(e.what()).find(var) != std::string::npos;
    }
    return false;
  };
  CS_CHECK(refused("CASESTUDY_FP8_AUDIT", "-1") && refused("CASESTUDY_FP8_AUDIT", "3x"));
  CS_CHECK(refused("CASESTUDY_FP8_AUDIT_EVERY", "often") && refused("CASESTUDY_FP8_BWD", "bf16"));
  CS_CHECK(refused("CASESTUDY_FP8_E5M2_GEMM", "row") && refused("CASESTUDY_FP8_E5M2_FOR", "dx,mlp"));
  CS_CHECK(refused("CASESTUDY_FP8_GRAD_AXIS", "rows") && refused("CASESTUDY_FP8_GRAD_DECORRELATE", "yes"));
  CS_CHECK(parse(env({{"CASESTUDY_FP8_GRAD_DECORRELATE", "1"}})).decorrelate);
  CS_CHECK(!parse(env({{"CASESTUDY_FP8_GRAD_DECORRELATE", "0"}})).any());
  auto gr = parse(env({{"CASESTUDY_FP8_GRAD_AXIS", "row"}}));
  CS_CHECK(gr.grad_rows && gr.any() && !parse(env({{"CASESTUDY_FP8_GRAD_AXIS", "tensor"}})).any());
  // GPT-2 124M's four layers (d = 768).
  CS_CHECK(kind_of(768, 2304) == Kind::Qkv && kind_of(768, 768) == Kind::AttnOut);
  CS_CHECK(kind_of(768, 3072) == Kind::MlpUp && kind_of(3072, 768) == Kind::MlpDown);
  CS_CHECK(kind_of(768, 1000) == Kind::Other);
  // The error measures: a result 10% small has gain -0.1, bias -0.1 (of a
  // positive exact), no flipped sign; a negated one gain -2 and every sign.
  torch::manual_seed(1);
  auto exact = torch::rand({64, 32}) + 0.5;
  auto e = compare(exact * 0.9, exact);
  CS_CHECK(std::abs(e.gain + 0.1) < 1e-6 && std::abs(e.bias + 0.1) < 1e-6 && std::abs(e.rel - 0.1) < 1e-6);
  CS_CHECK(e.signs == 0 && e.nonfinite == 0);
  auto n = compare(-exact, exact);
  CS_CHECK(std::abs(n.gain + 2) < 1e-6 && n.signs == 1.0);
  auto inf = exact.clone();
  inf[0][0] = std::numeric_limits<float>::infinity();
  CS_CHECK(compare(inf, exact).nonfinite == 1);
  // Gradients of 1e-12 (a 124M run's size): float64 inside, no underflow.
  auto tiny = compare(exact * 1e-12 * 1.05, exact * 1e-12);
  CS_CHECK(std::abs(tiny.gain - 0.05) < 1e-6);
  // dequant_mm: the scales per row of a and per column of b.
  auto a = torch::randn({16, 8}), b = torch::randn({8, 4});
  auto sa = torch::rand({16, 1}) + 0.5, sb = torch::rand({1, 4}) + 0.5;
  CS_CHECK(torch::allclose(dequant_mm(a, sa, b, sb), torch::mm(a * sa, b * sb)));
  CS_CHECK(torch::allclose(dequant_mm(a, sa, b, {}), torch::mm(a * sa, b)));
  // The audit line: every key fp8_diag.py reads, the kind and the formats.
  auto dz = torch::randn({16, 8}) * 1e-8, gq = (dz * 1e8).round(), ginv = torch::full({1, 1}, 1e-8);
  auto w = torch::randn({8, 4});
  auto p = torch::mm(gq * ginv, w);
  auto line = audit_line(3, 50, Kind::MlpDown, 4, false, "e5m2", "e4m3", s, dz, gq, ginv, torch::ones({16, 4}),
                         w.t() * 0 + 2, {{"dx", p, gq, w, ginv, {}, torch::mm(dz, w)}, {"dw", {}, {}, {}, {}, {}, {}}});
  for (const char* key : {"fp8 audit pass=3 fwd=50 kind=mlp_down rows=16 in=4 out=8 scaling=tensor dx=e5m2 dw=e4m3",
                          "bwd=qdq gemm=rowwise grad_axis=tensor decorrelate=0:", " dz amax=", " rms=", " underflow=", " cast_rel=", " cast_gain=",
                          " cast_bias=", "; x amax=1 rms=1; w amax=2 rms=2;", "; dx ops=", " rel=", " gain=", " bias=", " signs=", " nonfinite=0"})
    CS_CHECK(line.find(key) != std::string::npos);
  CS_CHECK(line.find("; dw") == std::string::npos);  // a product not computed is left out
  return 0;
}

// The plain C++ reference of the FP8 casts (fp8_ref.h) against the formats'
// definitions: every code round-trips, midpoints between neighbours go to the
// even code, just off a midpoint to the nearer one, the subnormals and zero,
// saturation beyond the largest value, known encodings.
int fp8ref_checks() {
  using fp8ref::from_float;
  using fp8ref::to_double;
  for (bool e5 : {false, true}) {
    const auto f = fp8ref::format(e5);
    for (int b = 0; b < 256; b++) {
      const double v = to_double(uint8_t(b), e5);
      if (std::isnan(v) || std::isinf(v)) continue;
      CS_CHECK(from_float(float(v), e5) == uint8_t(b));
    }
    for (int b = 0; b < f.max_code; b++) {
      const double lo = to_double(uint8_t(b), e5), hi = to_double(uint8_t(b + 1), e5);
      CS_CHECK(hi > lo);
      const float mid = float((lo + hi) / 2);
      CS_CHECK(double(mid) == (lo + hi) / 2);  // exact in float
      CS_CHECK(from_float(mid, e5) == uint8_t((b & 1) ? b + 1 : b));
      CS_CHECK(from_float(std::nextafter(mid, INFINITY), e5) == uint8_t(b + 1));
      CS_CHECK(from_float(std::nextafter(mid, 0.0f), e5) == uint8_t(b));
      CS_CHECK(from_float(-mid, e5) == uint8_t(0x80 | ((b & 1) ? b + 1 : b)));
    }
    CS_CHECK(to_double(f.max_code, e5) == f.max);
    CS_CHECK(from_float(float(f.max * 1.1), e5) == f.max_code && from_float(INFINITY, e5) == f.max_code);
    CS_CHECK(from_float(float(-f.max * 4), e5) == uint8_t(0x80 | f.max_code));
    CS_CHECK(from_float(NAN, e5) == f.nan_code && from_float(0.0f, e5) == 0 && from_float(-0.0f, e5) == 0x80);
    const double sub = to_double(1, e5);  // the smallest subnormal
    CS_CHECK(sub == std::ldexp(1.0, e5 ? -16 : -9));
    CS_CHECK(from_float(float(sub / 2), e5) == 0 && from_float(float(sub * 0.75), e5) == 1);
  }
  CS_CHECK(from_float(1.0f, false) == 0x38 && from_float(1.0f, true) == 0x3c);
  CS_CHECK(from_float(-2.0f, false) == 0xc0 && from_float(0.3f, true) == 0x35);  // 0.3 -> 0.3125
  return 0;
}

#if CS_FP8_CUDA_CASES
// The recipe's quantization, emulated: t ≈ q * inv with the amax over axis
// (-1 all, 1 each row, 0 each column), returned dequantized in float64.
torch::Tensor fake_quant(const torch::Tensor& t, at::ScalarType dt, int axis) {
  const double fmax = dt == at::kFloat8_e4m3fn ? 448.0 : 57344.0;
  auto a = t.to(torch::kFloat).abs();
  auto amax = axis < 0 ? a.amax({0, 1}, true) : a.amax({axis}, true);
  amax = amax.clamp_min(1e-12);
  auto scale = fmax / amax;
  auto q = (t.to(torch::kFloat) * scale).to(dt);
  return q.to(torch::kFloat64) * (amax / fmax).to(torch::kFloat64);
}

struct Case {
  std::vector<int64_t> xshape;  // [..., in]
  int64_t out;
  fp8::Scaling scaling;
  bool grad_e4m3;
  Act act = Act::None;
  // Training-like values instead of unit normals (realistic()): the products
  // against the emulation only.
  bool real = false;
};

std::string name(const Case& c) {
  std::string s;
  for (auto d : c.xshape) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s + " -> " + std::to_string(c.out) + (c.act == Act::None ? "" : " gelu") +
         (c.scaling == fp8::Scaling::Row ? " row" : " tensor") + (c.grad_e4m3 ? " e4m3" : " e5m2") +
         (c.real ? " training-like" : "");
}

// Values shaped like a transformer's in training, where the unit normals of
// the other cases are not: activations heavy-tailed (log-normal magnitudes)
// with a few outlier channels 30x the rest (as GPT-2's layer norms give);
// output gradients tiny (a loss averaged over 16,384 tokens: median 6e-12
// here, the amax about 7e-7, so that the dequantization scales, amax / 57344
// for e5m2, are about 1e-11, as small as a 124M run's by an estimate from
// its loss: 1e-10 to 1e-11, not measured), heavy-tailed over rows and
// columns, some rows exactly zero (the first token's query gradient under a
// causal mask). Per tensor, one amax then spans many binades (e5m2's
// subnormals and flushes included): where e5m2 or e4m3 products go wrong only
// there, the emulation comparison fails here.
torch::Tensor realistic_x(const std::vector<int64_t>& shape, const torch::TensorOptions& opt) {
  auto x = torch::randn(shape, opt) * torch::exp(torch::randn(shape, opt) * 0.7);
  x.narrow(-1, 0, 4).mul_(30.0);
  return x;
}

torch::Tensor realistic_dy(const std::vector<int64_t>& shape, const torch::TensorOptions& opt) {
  const int64_t out = shape.back();
  auto g = torch::randn(shape, opt) * torch::exp(torch::randn(shape, opt) * 1.5) * 1e-11;
  auto rows = g.reshape({-1, out});
  rows.mul_(torch::exp(torch::randn({rows.size(0), 1}, opt) * 1.5));  // row (token) scales
  rows.narrow(0, 0, std::max<int64_t>(1, rows.size(0) / 16)).zero_();
  return g;
}

// The kernel switch as the environment set it (restored after a case changes it).
void restore_kernels() {
  const char* v = std::getenv("CASESTUDY_KERNELS");
  kernels::set_for_tests(v ? v : "");
}

int check_case(const Case& c) {
  torch::manual_seed(3);
  auto opt = torch::TensorOptions().device(torch::kCUDA);
  const int64_t in = c.xshape.back(), out = c.out;
  // bf16 activations (as a layer norm hands them on), fp32 parameters.
  auto x = (c.real ? realistic_x(c.xshape, opt) : torch::randn(c.xshape, opt))
               .to(torch::kBFloat16)
               .requires_grad_(true);
  auto w = (torch::randn({out, in}, opt) * 0.02).requires_grad_(true);
  auto b = (torch::randn({out}, opt) * 0.1).requires_grad_(true);
  std::vector<int64_t> yshape = c.xshape;
  yshape.back() = out;
  auto dy = (c.real ? realistic_dy(yshape, opt) : torch::randn(yshape, opt) * 1e-3).to(torch::kBFloat16);

  fp8::Options o;
  o.scaling = c.scaling;
  o.grad_e4m3 = c.grad_e4m3;
  fp8::Scope scope;
  CS_CHECK(fp8::active(x, w));
  auto y = fp8::linear(x, w, b, o, c.act);
  CS_CHECK(y.scalar_type() == torch::kBFloat16);
  CS_CHECK(y.sizes() == torch::IntArrayRef(yshape));
  y.backward(dy);
  CS_CHECK(x.grad().scalar_type() == torch::kBFloat16 && x.grad().sizes() == x.sizes());
  CS_CHECK(w.grad().scalar_type() == torch::kFloat && b.grad().scalar_type() == torch::kFloat);
  // With a GELU, the product as the FP8 path left it: the same call without
  // the activation (the same quantization and matmul, so the same z).
  torch::Tensor z_fp8;
  if (c.act != Act::None) {
    torch::NoGradGuard no_grad;
    z_fp8 = fp8::linear(x.detach(), w.detach(), b.detach(), o, Act::None).reshape({-1, out});
  }

  // Exact values, float64.
  auto x2 = x.detach().reshape({-1, in}).to(torch::kFloat64);
  auto w64 = w.detach().to(torch::kFloat64), b64 = b.detach().to(torch::kFloat64);
  auto g2 = dy.reshape({-1, out}).to(torch::kFloat64);
  auto y_exact = torch::addmm(b64, x2, w64.t());
  auto dx_exact = torch::mm(g2, w64), dw_exact = torch::mm(g2.t(), x2);
  auto db_exact = g2.sum(0);

  // The recipe emulated.
  const auto e4 = at::kFloat8_e4m3fn, gd = c.grad_e4m3 ? e4 : at::kFloat8_e5m2;
  const bool row = c.scaling == fp8::Scaling::Row;
  auto xb = x.detach().reshape({-1, in}), wb = w.detach(), gb = dy.reshape({-1, out});
  // bias added in bf16 by the matmul's epilogue
  auto z_emul = torch::addmm(b.detach().to(torch::kBFloat16).to(torch::kFloat64),
                             fake_quant(xb, e4, row ? 1 : -1), fake_quant(wb, e4, row ? 1 : -1).t());
  auto y_emul = z_emul;
  double ez = 0, db_bound = 0;
  if (c.act != Act::None) {
    // The product itself against the emulation.
    ez = rel_err(z_fp8, z_emul);
    // The GELU of z as the FP8 path's product left it (bf16), its backward
    // from the same z; the quantized gradient is then dz (bf16), not dy. From
    // the emulation's own z instead (0.2-0.4% away: fast accumulation), GELU'
    // moves dz by as much, and e5m2's rounding (2 mantissa bits) turns that
    // into whole steps of 12-25% for the values near a rounding boundary: dx
    // and dw 1.03% from the emulation per row on the H100 (2026-12-06e),
    // differences of the reference, not of the path.
    const char* approx = c.act == Act::GeluTanh ? "tanh" : "none";
    auto zb = z_fp8.to(torch::kFloat64);
    y_emul = torch::gelu(zb, approx);
    gb = at::gelu_backward(gb.to(torch::kFloat64), zb, approx).to(torch::kBFloat16);
    // The exact values' GELU, for the errors against them.
    auto z_exact = y_exact;
    auto g_exact = at::gelu_backward(g2, z_exact, approx);
    y_exact = torch::gelu(z_exact, approx);
    g2 = g_exact;
    dx_exact = torch::mm(g2, w64), dw_exact = torch::mm(g2.t(), x2);
    db_exact = g2.sum(0);
    // db = sum over rows of dy GELU'(z): against the exact values it carries
    // GELU' taken at the FP8 product's z, not the exact z (the 2.2% measured
    // on the H100 with a 1% bar). |GELU'(a) - GELU'(b)| <= max|GELU''| |a - b|,
    // max|GELU''| = GELU''(0) = sqrt(2/pi) ~ 0.798 (erf and tanh forms); with
    // dy independent of z, a column sum's error relative to the sum is the
    // RMS of the GELU' error over the RMS of GELU' (in expectation; 3072
    // columns of 512+ rows average the fluctuation out). Plus bf16's rounding
    // of dz (2^-8). The bound follows from the forward's own error (e4m3's,
    // itself under the 6% bar below), measured here, not from a chosen bar.
    auto gp = at::gelu_backward(torch::ones_like(z_exact), z_exact, approx);
    auto rms = [](const torch::Tensor& t) { return t.pow(2).mean().sqrt().item<double>(); };
    db_bound = 0.8 * rms(zb - z_exact) / rms(gp) + std::ldexp(1.0, -8);
  }
  // The bias gradient the emulation gives: the sum of its dz (dy without an
  // activation).
  auto db_emul = gb.to(torch::kFloat64).sum(0);
  auto dx_emul = torch::mm(fake_quant(gb, gd, row ? 1 : -1), fake_quant(wb, e4, row ? 0 : -1));
  auto dw_emul = torch::mm(fake_quant(gb, gd, row ? 0 : -1).t(), fake_quant(xb, e4, row ? 0 : -1));

  auto y2 = y.detach().reshape({-1, out}), dx2 = x.grad().reshape({-1, in});
  const double ey = rel_err(y2, y_emul), edx = rel_err(dx2, dx_emul), edw = rel_err(w.grad(), dw_emul);
  const double xy = rel_err(y2, y_exact), xdx = rel_err(dx2, dx_exact), xdw = rel_err(w.grad(), dw_exact);
  const double edb = rel_err(b.grad(), db_exact), edb_emul = rel_err(b.grad(), db_emul);
  std::cout << "    " << name(c) << ": vs emulation y " << ey << " dx " << edx << " dw " << edw
            << " db " << edb_emul;
  if (c.act != Act::None) std::cout << " z " << ez << " (db vs exact bound " << db_bound << ")";
  std::cout << "; vs exact y " << xy << " dx " << xdx << " dw " << xdw << " db " << edb << "\n";
  CS_CHECK(torch::isfinite(y).all().item<bool>() && torch::isfinite(x.grad()).all().item<bool>() &&
           torch::isfinite(w.grad()).all().item<bool>());
  // The forward's fast accumulation measured at most 0.4% from the emulation at
  // K = 3072 on an H100 (gpu-check-2026-12-06e): the 1% bar holds at every K here.
  CS_CHECK(ey < 1e-2 && edx < 1e-2 && edw < 1e-2);
  CS_CHECK(ez < 1e-2);
  // The bias gradient is an fp32 sum of the dz the emulation quantizes too:
  // the 1% bar of the products (bf16 rounding of dz aside, it is exact).
  CS_CHECK(edb_emul < 1e-2);
  // Training-like values: the products against the emulation only. Against the
  // exact values, per-tensor e4m3 then flushes the small activations under the
  // outlier channels' amax (2^-17.8 of it), an error of the recipe, not of
  // the implementation; what fails here is a product that differs from the
  // recipe's emulation on such values.
  if (c.real) return 0;
  const double grad_hi = c.grad_e4m3 ? 0.06 : 0.10;
  CS_CHECK(xy < 0.06 && xdx < grad_hi && xdw < grad_hi);
  if (c.act == Act::None) {  // FP8 really ran (the GELU's flat part may hide some of its error)
    CS_CHECK(xy > 5e-3 && xdx > 5e-3 && xdw > 5e-3);
    CS_CHECK(edb < 1e-4);  // the bias gradient is a plain fp32 sum of dy
  } else {
    CS_CHECK(edb < db_bound);  // a sum of dz, whose GELU' saw the FP8 product's z (above)
  }
  return 0;
}

// The casts on the GPU against fp8_ref.h, value by value: every finite bf16
// value up to the format's largest, with that largest as the amax (so that the
// scale is about 1 and the cast sees the whole range, subnormals included),
// through the fp8cast kernels and through ATen's conversion (c10's). Expected:
// the reference's code of RN(x * scale), scale = RN(RN(1 / amax) * fmax) in
// float as both compute it.
int check_rounding() {
  for (bool e5 : {false, true}) {
    const auto f = fp8ref::format(e5);
    std::vector<float> vals;
    for (uint32_t bits = 0; bits < 65536; bits++) {
      const uint32_t u = bits << 16;
      float v;
      std::memcpy(&v, &u, sizeof v);
      if (std::isfinite(v) && std::fabs(v) <= f.max) vals.push_back(v);
    }
    vals.push_back(float(f.max));
    while (vals.size() % 256) vals.push_back(0.0f);
    auto cpu = torch::from_blob(vals.data(), {int64_t(vals.size()) / 256, 256}, torch::kFloat).clone();
    auto x = cpu.to(torch::kCUDA).to(torch::kBFloat16);  // exact: every value is a bf16
    volatile float fmax = float(f.max);
    const float scale = (1.0f / fmax) * fmax;
    std::vector<uint8_t> want(vals.size());
    for (size_t i = 0; i < vals.size(); i++) want[i] = fp8ref::from_float(vals[i] * scale, e5);
    for (const char* k : {"all", "-fp8cast"}) {
      kernels::set_for_tests(k);
      auto q = fp8::quantize(x, e5, fp8::Axis::Tensor, true, true);
      auto got = q.q.view(torch::kUInt8).cpu().contiguous();
      auto got_t = q.qt.t().contiguous().view(torch::kUInt8).cpu();
      const uint8_t* g = got.data_ptr<uint8_t>();
      int64_t bad = 0, first = -1;
      for (size_t i = 0; i < vals.size(); i++)
        if (g[i] != want[i] && bad++ == 0) first = int64_t(i);
      std::cout << "    rounding " << (e5 ? "e5m2" : "e4m3") << " (kernels " << k << "): " << vals.size()
                << " values, scale " << scale << ", " << bad << " differ from fp8_ref.h";
      if (first >= 0)
        std::cout << " (first: " << vals[size_t(first)] << " -> 0x" << std::hex << int(g[first]) << ", want 0x"
                  << int(want[size_t(first)]) << std::dec << ")";
      std::cout << "\n";
      CS_CHECK(bad == 0);
      CS_CHECK(torch::equal(got, got_t));
    }
  }
  restore_kernels();
  return 0;
}

// The diagnostic switches on the GPU (fp8_diag.h): each backward mode gives
// the products it names. The layer is a qkv (out = 3 in) for the layer-kind
// switch. Values within 1e-6 where two runs must compute the same thing from
// the same FP8 operands (cuBLASLt is deterministic on one stream).
struct DiagGrads {
  torch::Tensor dx, dw;
};

DiagGrads diag_run(const std::map<std::string, std::string>& vars, fp8::Scaling s, bool e4,
                   const torch::Tensor& x0, const torch::Tensor& w0, const torch::Tensor& dy) {
  for (const auto& v : vars) setenv(v.first.c_str(), v.second.c_str(), 1);
  fp8::Options o;
  o.scaling = s;
  o.grad_e4m3 = e4;
  fp8::configure(o);
  auto x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true);
  {
    fp8::Scope scope;
    fp8::linear(x, w, torch::Tensor(), o).backward(dy);
  }
  for (const auto& v : vars) unsetenv(v.first.c_str());
  fp8::configure(fp8::Options{});
  return {x.grad(), w.grad()};
}

int check_diag_modes() {
  torch::manual_seed(5);
  auto opt = torch::TensorOptions().device(torch::kCUDA);
  const int64_t M = 256, in = 128, out = 384;
  auto x = torch::randn({M, in}, opt).to(torch::kBFloat16);
  auto w = torch::randn({out, in}, opt) * 0.02;
  auto dy = (torch::randn({M, out}, opt) * 1e-3).to(torch::kBFloat16);
  const auto T = fp8::Scaling::Tensor;
  const auto e5 = at::kFloat8_e5m2, e4 = at::kFloat8_e4m3fn;
  auto dz64 = dy.to(torch::kFloat64), x64 = x.to(torch::kFloat64), w64 = w.to(torch::kFloat64);
  auto dx_exact = torch::mm(dz64, w64), dw_exact = torch::mm(dz64.t(), x64);
  auto base = diag_run({}, T, false, x, w, dy), base4 = diag_run({}, T, true, x, w, dy);
  // emulate: the same FP8 operands in fp32, against _scaled_mm's products.
  auto em = diag_run({{"CASESTUDY_FP8_BWD", "emulate"}}, T, false, x, w, dy);
  CS_CHECK(rel_err(em.dx, base.dx) < 1e-2 && rel_err(em.dw, base.dw) < 1e-2);
  // exact: no quantization (dx rounded to bf16, dw fp32).
  auto ex = diag_run({{"CASESTUDY_FP8_BWD", "exact"}}, T, false, x, w, dy);
  CS_CHECK(rel_err(ex.dx, dx_exact) < 5e-3 && rel_err(ex.dw, dw_exact) < 1e-5);
  // qdq: dz's e5m2 values times the unquantized operand.
  auto qd = diag_run({{"CASESTUDY_FP8_BWD", "qdq"}}, T, false, x, w, dy);
  auto gq = fake_quant(dy, e5, -1);
  CS_CHECK(rel_err(qd.dx, torch::mm(gq, w64)) < 5e-3 && rel_err(qd.dw, torch::mm(gq.t(), x64)) < 1e-3);
  CS_CHECK(rel_err(qd.dx, dx_exact) > 5e-3);  // e5m2 really ran
  // e5m2 for one product only: that product as the e5m2 run's, the other as the e4m3 run's.
  auto only_dx = diag_run({{"CASESTUDY_FP8_E5M2_FOR", "dx"}}, T, false, x, w, dy);
  CS_CHECK(rel_err(only_dx.dx, base.dx) < 1e-6 && rel_err(only_dx.dw, base4.dw) < 1e-6);
  auto only_dw = diag_run({{"CASESTUDY_FP8_E5M2_FOR", "dw"}}, T, false, x, w, dy);
  CS_CHECK(rel_err(only_dw.dx, base4.dx) < 1e-6 && rel_err(only_dw.dw, base.dw) < 1e-6);
  CS_CHECK(rel_err(base.dx, base4.dx) > 1e-3);  // the two formats differ here
  // a layer kind not listed: e4m3 throughout (this layer is a qkv).
  auto other_kind = diag_run({{"CASESTUDY_FP8_E5M2_FOR", "mlp_down,attn_out"}}, T, false, x, w, dy);
  CS_CHECK(rel_err(other_kind.dx, base4.dx) < 1e-6 && rel_err(other_kind.dw, base4.dw) < 1e-6);
  // dz per row (dX) and per column (dW), W and x per tensor.
  auto gr = diag_run({{"CASESTUDY_FP8_GRAD_AXIS", "row"}}, T, false, x, w, dy);
  CS_CHECK(rel_err(gr.dx, torch::mm(fake_quant(dy, e5, 1), fake_quant(w, e4, -1))) < 1e-2);
  CS_CHECK(rel_err(gr.dw, torch::mm(fake_quant(dy, e5, 0).t(), fake_quant(x, e4, -1))) < 1e-2);
  // decorrelated: dX as before; dW's dz on the grid of 0.75 fmax.
  auto dc = diag_run({{"CASESTUDY_FP8_GRAD_DECORRELATE", "1"}}, T, false, x, w, dy);
  auto amax = dy.to(torch::kFloat).abs().max().clamp_min(1e-12);
  auto scale = 0.75 * 57344.0 / amax;
  auto g_shift = (dy.to(torch::kFloat) * scale).to(e5).to(torch::kFloat64) / scale.to(torch::kFloat64);
  CS_CHECK(rel_err(dc.dx, base.dx) < 1e-6);
  CS_CHECK(rel_err(dc.dw, torch::mm(g_shift.t(), fake_quant(x, e4, -1))) < 1e-2);
  CS_CHECK(rel_err(dc.dw, base.dw) > 1e-3);  // another rounding of dz
  std::cout << "    diagnostic modes: emulate dx " << rel_err(em.dx, base.dx) << " dw " << rel_err(em.dw, base.dw)
            << "; qdq dx vs exact " << rel_err(qd.dx, dx_exact) << "; decorrelated dw vs one cast "
            << rel_err(dc.dw, base.dw) << "\n";
  return 0;
}

// check_case with the quantization through the fp8cast kernels and through
// ATen ops: both must pass, and their outputs and gradients agree (the same
// FP8 operands and products, so equal up to the products' own rounding).
int check_both(const Case& c) {
  std::vector<torch::Tensor> got[2];
  for (int k = 0; k < 2; k++) {
    kernels::set_for_tests(k == 0 ? "all" : "-fp8cast");
    torch::manual_seed(11);
    auto opt = torch::TensorOptions().device(torch::kCUDA);
    auto x = torch::randn(c.xshape, opt).to(torch::kBFloat16).requires_grad_(true);
    auto w = (torch::randn({c.out, c.xshape.back()}, opt) * 0.02).requires_grad_(true);
    auto b = (torch::randn({c.out}, opt) * 0.1).requires_grad_(true);
    fp8::Options o;
    o.scaling = c.scaling;
    o.grad_e4m3 = c.grad_e4m3;
    fp8::Scope scope;
    auto y = fp8::linear(x, w, b, o, c.act);
    y.backward(torch::randn_like(y) * 1e-3);
    got[k] = {y.detach(), x.grad(), w.grad(), b.grad()};
  }
  restore_kernels();
  const char* what[] = {"y", "dx", "dw", "db"};
  std::cout << "    " << name(c) << ": fp8cast kernels vs ATen quantization:";
  int bad = 0;
  for (int i = 0; i < 4; i++) {
    const double e = rel_err(got[0][size_t(i)], got[1][size_t(i)]);
    std::cout << " " << what[i] << " " << e;
    if (!(e <= 1e-5)) bad++;
  }
  std::cout << "\n";
  CS_CHECK(bad == 0);
  return 0;
}

#ifdef CS_TEST_FP8CAST
// Values over many binades (FP8's subnormals and its largest values both
// reached), exact zeros, and an all-zero row and column (the amax clamp).
torch::Tensor spread(int64_t rows, int64_t cols, at::ScalarType dt) {
  auto opt = torch::TensorOptions().device(torch::kCUDA);
  auto t = torch::randn({rows, cols}, opt) * torch::exp(torch::randn({rows, cols}, opt) * 3.0);
  t.masked_fill_(torch::rand({rows, cols}, opt) < 0.05, 0.0);
  t.select(0, 0).zero_();
  t.select(1, cols - 1).zero_();
  return t.clamp_(-6e4, 6e4).to(dt);  // finite in fp16 too
}

cuda::DType kdtype(at::ScalarType t) {
  return t == at::kFloat ? cuda::DType::F32 : t == at::kBFloat16 ? cuda::DType::BF16 : cuda::DType::F16;
}

// fp8_amax against ATen's amax of |t| (fp32), exactly, per tensor, row and
// column; the output starts as -1 (whose bits lie above every |x|'s): the
// launcher must clear what it reduces into.
int check_amax(const torch::Tensor& t) {
  const int64_t rows = t.size(0), cols = t.size(1);
  auto a = t.abs().to(torch::kFloat);
  const std::pair<cuda::Fp8Axis, torch::Tensor> want[] = {
      {cuda::Fp8Axis::Tensor, a.amax(c10::IntArrayRef{0, 1}).reshape({1})},
      {cuda::Fp8Axis::Rows, a.amax(c10::IntArrayRef{1})},
      {cuda::Fp8Axis::Cols, a.amax(c10::IntArrayRef{0})}};
  for (const auto& [ax, ref] : want) {
    auto got = torch::full({ref.numel()}, -1.0f, a.options());
    const auto e = cuda::fp8_amax(t.data_ptr(), kdtype(t.scalar_type()), rows, cols, ax,
                                  got.data_ptr<float>(), c10::cuda::getCurrentCUDAStream().stream());
    CS_CHECK(e == cudaSuccess);
    CS_CHECK(torch::equal(got, ref));
  }
  return 0;
}

torch::Tensor bytes(const torch::Tensor& q) { return q.view(torch::kUInt8); }

// fp8::quantize through the kernels against its ATen recipe: q and qt bit for
// bit, inv within one fp32 rounding, for both formats and the three axes;
// only the copies asked for are written.
int check_quantize(const torch::Tensor& t) {
  int failed = 0;
  for (bool e5m2 : {false, true})
    for (auto ax : {fp8::Axis::Tensor, fp8::Axis::Rows, fp8::Axis::Cols}) {
      kernels::set_for_tests("all");
      const bool fused = fp8::fused_quantize(t);
      auto f = fp8::quantize(t, e5m2, ax, true, true);
      auto only_qt = fp8::quantize(t, e5m2, ax, false, true);
      kernels::set_for_tests("-fp8cast");
      const bool aten = !fp8::fused_quantize(t);
      auto r = fp8::quantize(t, e5m2, ax, true, true);
      restore_kernels();
      const bool ok = fused && aten && torch::equal(bytes(f.q), bytes(r.q)) &&
                      torch::equal(bytes(f.qt), bytes(r.qt)) &&
                      torch::equal(bytes(f.qt), bytes(f.q).t().contiguous()) &&
                      f.inv.sizes() == r.inv.sizes() &&
                      ((f.inv - r.inv).abs() <= r.inv.abs() * 1.2e-7).all().item<bool>() &&
                      !only_qt.q.defined() && torch::equal(bytes(only_qt.qt), bytes(f.qt));
      if (!ok) {
        std::cout << "    quantize " << c10::toString(t.scalar_type()) << " " << t.size(0) << "x"
                  << t.size(1) << (e5m2 ? " e5m2" : " e4m3") << " axis " << int(ax)
                  << ": the kernels differ from the ATen recipe (fused " << fused << ")\n";
        failed++;
      }
    }
  return failed;
}

// The kernels captured in a CUDA graph: replayed after the input's storage
// got other values, they give what an eager call on those values gives (the
// scale is computed on the device at every replay, no host sync in between).
int check_graph() {
  auto t = spread(256, 512, at::kBFloat16), t2 = spread(256, 512, at::kBFloat16);
  kernels::set_for_tests("all");
  for (auto ax : {fp8::Axis::Tensor, fp8::Axis::Rows, fp8::Axis::Cols}) {
    fp8::quantize(t, false, ax, true, true);  // eager first: the kernels loaded before the capture
    fp8::Quantized g;
    at::cuda::CUDAGraph graph;
    {
      c10::cuda::CUDAStreamGuard guard(c10::cuda::getStreamFromPool());
      graph.capture_begin();
      g = fp8::quantize(t, false, ax, true, true);
      graph.capture_end();
    }
    auto keep = t.clone();
    t.copy_(t2);
    graph.replay();
    torch::cuda::synchronize();
    auto want = fp8::quantize(t2, false, ax, true, true);
    CS_CHECK(torch::equal(bytes(g.q), bytes(want.q)) && torch::equal(bytes(g.qt), bytes(want.qt)) &&
             torch::equal(g.inv, want.inv));
    t.copy_(keep);
  }
  restore_kernels();
  return 0;
}

int check_fp8cast() {
  torch::manual_seed(7);
  int failed = 0;
  const struct {
    int64_t rows, cols;
    at::ScalarType dt;
  } shapes[] = {{256, 512, at::kBFloat16}, {4096, 768, at::kBFloat16}, {768, 3072, at::kFloat},
                {37, 50, at::kFloat},      {64, 130, at::kHalf},       {130, 66, at::kBFloat16}};
  for (const auto& sh : shapes) {
    auto t = spread(sh.rows, sh.cols, sh.dt);
    failed += check_amax(t) + check_quantize(t);
  }
  // Misaligned: the matrix starts one element into its storage.
  auto base = spread(1, 64 * 130 + 1, at::kBFloat16);
  auto mis = base.narrow(1, 1, 64 * 130).view({64, 130});
  failed += check_amax(mis) + check_quantize(mis);
  // Non-finite: a nan anywhere makes the amax nan.
  auto n = spread(64, 64, at::kBFloat16);
  n.select(0, 5).select(0, 7).fill_(std::numeric_limits<float>::quiet_NaN());
  auto got = torch::empty({1}, n.options().dtype(torch::kFloat));
  CS_CHECK(cuda::fp8_amax(n.data_ptr(), cuda::DType::BF16, 64, 64, cuda::Fp8Axis::Tensor,
                          got.data_ptr<float>(), c10::cuda::getCurrentCUDAStream().stream()) == cudaSuccess);
  CS_CHECK(std::isnan(got.item<float>()));
  failed += check_graph();
  std::cout << "  fp8_linear fp8cast kernels " << (failed ? "FAILED" : "ok")
            << " (amax exact, cast bit for bit, replayed in a CUDA graph)\n";
  return failed;
}
#endif

// 30 Adam steps of a two-layer MLP (x [4096, 256] -> 1024 GELU -> 256)
// fitting a fixed random teacher of the same shape, drawn from seed, from the
// same start, in fp32, in bf16 or through fp8::linear with o: every step's
// loss. The inputs are training-like (realistic_x) and the loss a mean over a
// million values, so the gradients are as small as a transformer's.
enum class MlpMode { FP32, BF16, FP8 };
std::vector<double> train_mlp(MlpMode mode, const fp8::Options& o, uint64_t seed) {
  torch::manual_seed(seed);
  auto opt = torch::TensorOptions().device(torch::kCUDA);
  const int64_t rows = 4096, in = 256, hid = 1024, out = 256;
  auto x = realistic_x({rows, in}, opt).to(torch::kBFloat16);
  auto t1 = torch::randn({hid, in}, opt) * 0.05, t2 = torch::randn({out, hid}, opt) * 0.05;
  auto target = torch::mm(torch::gelu(torch::mm(x.to(torch::kFloat), t1.t()), "tanh"), t2.t());
  auto w1 = (torch::randn({hid, in}, opt) * 0.05).requires_grad_(true);
  auto w2 = (torch::randn({out, hid}, opt) * 0.05).requires_grad_(true);
  auto b1 = torch::zeros({hid}, opt).requires_grad_(true), b2 = torch::zeros({out}, opt).requires_grad_(true);
  torch::optim::Adam adam({w1, b1, w2, b2}, torch::optim::AdamOptions(1e-3));
  std::vector<double> losses;
  for (int step = 0; step < 30; step++) {
    adam.zero_grad();
    torch::Tensor y;
    if (mode == MlpMode::FP8) {
      fp8::Scope scope;
      y = fp8::linear(fp8::linear(x, w1, b1, o, Act::GeluTanh), w2, b2, o, Act::None);
    } else if (mode == MlpMode::BF16) {
      const auto bf = torch::kBFloat16;
      auto h = torch::gelu(torch::linear(x, w1.to(bf), b1.to(bf)), "tanh");
      y = torch::linear(h, w2.to(bf), b2.to(bf));
    } else {
      y = torch::linear(torch::gelu(torch::linear(x.to(torch::kFloat), w1, b1), "tanh"), w2, b2);
    }
    auto loss = (y.to(torch::kFloat) - target).pow(2).mean();
    loss.backward();
    adam.step();
    losses.push_back(loss.item<double>());
  }
  return losses;
}

// The MLP trained in FP8 per tensor and per row with e5m2 gradients and per
// tensor with e4m3, against bf16 from the same start, over 3 seeds: an
// end-to-end check that FP8 training works (every run learns, and each
// recipe's last loss lies within kFp8MlpSlack of bf16's in every seed), with
// a bound set from a measurement, not issue 41's quality criterion.
// Measured (H100, 2026-12-07, main 6318563; gpu-check tests): after 30 Adam
// steps every recipe ended 1.9% to 2.8% above bf16 (seed 23: fp32 3.4159,
// bf16 3.4168, tensor e5m2 3.5109, tensor e4m3 3.5125, row e5m2 3.4948;
// seeds 29 and 31: 1.9-2.4%), its curve 0.066-0.088 from fp32's where bf16's
// is 0.0015-0.0017. That is FP8's own rounding on this small MLP (its
// products pass the emulation checks above at 1e-2): issue 41's criterion
// (FP8's curve no further from fp32's than bf16's beyond the seeds' spread;
// losscurve.py, on GPT-2 and BERT curves of 200 steps in gpu-check's
// losscurve stage) fails for every recipe here and is printed, not asserted.
// kFp8MlpSlack = 5%: 1.8 times the largest measured gap, so a recipe whose
// error on this MLP doubles, or one that stops learning, fails.
constexpr double kFp8MlpSlack = 0.05;

int check_training() {
  const std::vector<uint64_t> seeds{23, 29, 31};
  const double t95 = 2.920;  // Student's t, one-sided 95%, 2 degrees of freedom
  auto dist = [](const std::vector<double>& a, const std::vector<double>& f) {
    double d = 0;
    for (size_t i = 0; i < a.size(); i++) d += std::abs(a[i] - f[i]);
    return d / double(a.size());
  };
  std::vector<std::vector<double>> fp32, bf16;
  for (uint64_t s : seeds) {
    fp32.push_back(train_mlp(MlpMode::FP32, fp8::Options{}, s));
    bf16.push_back(train_mlp(MlpMode::BF16, fp8::Options{}, s));
    CS_CHECK(bf16.back().back() < 0.9 * bf16.back().front());  // it learns: the comparison means something
  }
  int bad = 0;
  for (const auto& [scaling, e4] : {std::pair{fp8::Scaling::Tensor, false}, std::pair{fp8::Scaling::Tensor, true},
                                    std::pair{fp8::Scaling::Row, false}}) {
    fp8::Options o;
    o.scaling = scaling;
    o.grad_e4m3 = e4;
    std::vector<double> D;
    std::ostringstream row;
    bool ok = true;
    for (size_t k = 0; k < seeds.size(); k++) {
      const auto f8 = train_mlp(MlpMode::FP8, o, seeds[k]);
      const double d8 = dist(f8, fp32[k]), db = dist(bf16[k], fp32[k]);
      const double gap = f8.back() / bf16[k].back() - 1;
      const bool learns = f8.back() < 0.9 * f8.front(), within = gap <= kFp8MlpSlack;  // a nan fails
      ok = ok && learns && within;
      D.push_back(d8 - db);
      row << " seed " << seeds[k] << ": last fp32 " << fp32[k].back() << " bf16 " << bf16[k].back() << " fp8 "
          << f8.back() << " (" << (gap >= 0 ? "+" : "") << 100 * gap << "%" << (within ? "" : " > bound")
          << (learns ? "" : ", does not learn") << "), d bf16 " << db << " fp8 " << d8 << ";";
    }
    double mean = 0, var = 0;
    for (double v : D) mean += v / double(D.size());
    for (double v : D) var += (v - mean) * (v - mean) / double(D.size() - 1);
    const double lower = mean - t95 * std::sqrt(var) / std::sqrt(double(D.size()));
    std::cout << "    mlp 30 Adam steps, " << (scaling == fp8::Scaling::Row ? "row " : "tensor ")
              << (e4 ? "e4m3" : "e5m2") << ": last loss within " << 100 * kFp8MlpSlack << "% of bf16's and learns "
              << (ok ? "in every seed" : "FAILS") << ";" << row.str()
              << " (issue 41's criterion, not asserted here: mean(D) " << mean << ", 95% lower bound " << lower
              << (lower > 0 ? " > 0" : " <= 0") << ")\n";
    if (!ok) bad++;
  }
  CS_CHECK(bad == 0);
  return 0;
}

// linear_act under AutocastScope(fp8) takes the FP8 path where active() and
// bf16 autocast's elsewhere (an output of 40 columns is not a multiple of 16).
int check_wiring() {
  torch::manual_seed(5);
  auto opt = torch::TensorOptions().device(torch::kCUDA);
  auto x = torch::randn({2, 64, 128}, opt).to(torch::kBFloat16);
  auto w = torch::randn({256, 128}, opt) * 0.02, b = torch::zeros({256}, opt);
  auto w40 = torch::randn({40, 128}, opt) * 0.02, b40 = torch::zeros({40}, opt);
  fp8::configure(fp8::Options{});
  torch::Tensor a, ref, a40, ref40;
  {
    AutocastScope scope(x.device(), Precision::FP8);
    CS_CHECK(fp8::on());
    a = linear_act(x, w, b, Act::None);
    ref = fp8::linear(x, w, b, fp8::Options{});
    CS_CHECK(!fp8::active(x, w40));
    a40 = linear_act(x, w40, b40, Act::None);
  }
  CS_CHECK(!fp8::on());
  {
    AutocastScope scope(x.device(), Precision::BF16);
    ref40 = linear_act(x, w40, b40, Act::None);
  }
  CS_CHECK(a.scalar_type() == torch::kBFloat16);
  CS_CHECK(torch::equal(a, ref));
  CS_CHECK(torch::equal(a40, ref40));
  return 0;
}
#endif

}  // namespace

int fp8_linear_tests() {
  int failed = run_case("fp8_linear", "cpu refusals", cpu_checks);
  failed += run_case("fp8_linear", "diagnostic switches", diag_checks);
#if CS_FP8_CUDA_CASES
  if (!torch::cuda::is_available()) return failed;
  const torch::Device gpu(torch::kCUDA, c10::cuda::current_device());
  const auto why = fp8::unsupported_reason(gpu);
  if (!why.empty()) {  // a GPU below 8.9, or an engine built without FP8
    std::cout << "  fp8_linear: FP8 not available here, refusal checked only: " << why << "\n";
    if (why.find("compute capability 8.9") == std::string::npos) failed++;
    return failed;
  }
  std::vector<Case> cases;
  for (auto s : {fp8::Scaling::Tensor, fp8::Scaling::Row}) {
    for (bool e4 : {false, true}) {
      cases.push_back({{256, 512}, 384, s, e4});
      cases.push_back({{4, 128, 768}, 3072, s, e4});  // GPT-2's MLP up-projection at 4 x 128
    }
    cases.push_back({{4, 128, 768}, 3072, s, false, Act::GeluTanh});
    // GPT-2 124M's layers at 16 x 1024 tokens: qkv, attention out, MLP up, MLP down.
    cases.push_back({{16, 1024, 768}, 2304, s, false});
    cases.push_back({{16, 1024, 768}, 768, s, false});
    cases.push_back({{16, 1024, 768}, 3072, s, false, Act::GeluTanh});
    cases.push_back({{16, 1024, 3072}, 768, s, false});
    // The same four at training-like values (realistic_x, realistic_dy), both
    // gradient formats: per tensor with e5m2 gradients diverged on GPT-2 124M
    // where e4m3 and per row tracked bf16 (gpu-check-2026-12-06e).
    for (bool e4 : {false, true}) {
      cases.push_back({{16, 1024, 768}, 2304, s, e4, Act::None, true});
      cases.push_back({{16, 1024, 768}, 768, s, e4, Act::None, true});
      cases.push_back({{16, 1024, 768}, 3072, s, e4, Act::GeluTanh, true});
      cases.push_back({{16, 1024, 3072}, 768, s, e4, Act::None, true});
    }
  }
  for (const char* k : {"all", "-fp8cast"}) {
    kernels::set_for_tests(k);
    for (const auto& c : cases) {
      // The training-like cases once: the divergence they look for did not
      // depend on the quantization's implementation (gpu-check-2026-12-06e).
      if (c.real && std::string(k) != "all") continue;
      failed += run_case("fp8_linear", name(c) + " (kernels " + k + ")", [&] { return check_case(c); });
    }
  }
  restore_kernels();
  failed += run_case("fp8_linear", "mlp training, fp8 within 5% of bf16 over seeds", check_training);
  failed += run_case("fp8_linear", "linear_act wiring", check_wiring);
  failed += run_case("fp8_linear", "diagnostic modes", check_diag_modes);
  std::cout << "  fp8_linear cuda ok (" << cases.size() << " cases, quantized by the fp8cast kernels "
            << (fp8::fused_quantize(torch::zeros({16, 16}, torch::kCUDA)) ? "and" : "(not built here) and")
            << " by ATen ops)\n";
#endif
  return failed;
}

// The fp8cast kernels alone (gpu-check.sh switches "fp8cast" off where this
// suite fails): amax and cast against the ATen recipe, and fp8::linear's
// results through them equal to those through ATen's quantization.
int fp8_cast_tests() {
  int failed = run_case("fp8_cast", "reference casts (fp8_ref.h)", fp8ref_checks);
#if CS_FP8_CUDA_CASES
  if (!torch::cuda::is_available() || !fp8::unsupported_reason(torch::Device(torch::kCUDA)).empty()) {
    std::cout << "  fp8_cast: no FP8 GPU here, the reference casts only\n";
    return failed;
  }
  failed += run_case("fp8_cast", "rounding against fp8_ref.h (kernels and ATen)", check_rounding);
#ifdef CS_TEST_FP8CAST
  failed += run_case("fp8_cast", "amax and cast", check_fp8cast);
  for (auto s : {fp8::Scaling::Tensor, fp8::Scaling::Row})
    for (const Case& c : {Case{{4, 128, 768}, 3072, s, false}, Case{{4, 128, 768}, 3072, s, true, Act::GeluTanh},
                          Case{{256, 512}, 384, s, true}})
      failed += run_case("fp8_cast", name(c) + " fp8cast = ATen", [&] { return check_both(c); });
#else
  std::cout << "  fp8_cast: this build has no fp8cast kernels (no nvcc, or CS_WITH_FP8=OFF)\n";
#endif
#else
  std::cout << "  fp8_cast: CPU build (or libtorch < 2.5: no FP8), the reference casts only\n";
#endif
  return failed;
}
