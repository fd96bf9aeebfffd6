// fp8_diag.h: the diagnostic switches of precision fp8's backward
// (fp8_linear.cpp), read from the environment at fp8::configure(), all off by
// default (docs/engine.md, "Diagnostic switches of precision fp8"). They
// localise the divergence of per-tensor scaling with e5m2 gradients (GPT-2
// 124M, docs/perf.md) in one GPU call (scripts/gpu-check.sh stage fp8-diag):
//   CASESTUDY_FP8_AUDIT=N        the first N backward passes of FP8 layers
//                                print an audit line each (audit_line)
//   CASESTUDY_FP8_AUDIT_EVERY=K  every FP8 layer's backward pass of forward
//                                passes 0, K, 2K, ... (forward passes counted
//                                by fp8::Scope: one per micro-batch) is audited
//   CASESTUDY_FP8_E5M2_GEMM=rowwise  the products with an e5m2 operand and
//                                scalar scales through the row-wise GEMM
//   CASESTUDY_FP8_BWD=MODE       the backward's two products:
//     scaled   at::_scaled_mm on the FP8 operands (the default, the recipe)
//     emulate  the same FP8 operands dequantized, multiplied in fp32 (at::mm):
//              the recipe's numerics without the scaled GEMM
//     qdq      the gradient's FP8 values dequantized times the unquantized
//              other operand (W, x), fp32: the gradient's quantization alone
//     exact    no quantization in the backward: dz, W and x as they are, fp32
//              (FP8 in the forward only)
//   CASESTUDY_FP8_GRAD_AXIS=row  per-tensor scaling with the gradient's scales
//                                as fp8.scaling row's (dz per row for dX, per
//                                column for dW), W and x still per tensor: the
//                                gradient's scaling apart from the operands'
//   CASESTUDY_FP8_GRAD_DECORRELATE=1  per tensor, dW's copy of dz cast with
//                                its amax mapped to 0.75 fmax: the rounding
//                                errors of dX's and dW's gradients nearly
//                                independent (per tensor they are one cast)
//   CASESTUDY_FP8_E5M2_FOR=LIST  under fp8.grad e5m2, e5m2 only where LIST
//                                names the product (dx, dw) and the layer kind
//                                (qkv, attn_out, mlp_up, mlp_down, other); the
//                                rest takes e4m3. A list without products
//                                means both, one without kinds every kind.
// Eager steps only: a step being captured into a CUDA graph is not audited
// (the audit reads values back to the host). Apart from the audit's and
// emulation's own work nothing here costs anything when off.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cs {
namespace fp8 {
namespace diag {

enum class Bwd { Scaled, Emulate, Qdq, Exact };

// A transformer block's linear layers, told apart by their shapes (GPT-2's and
// BERT's: in = d for qkv [3d], attention out [d] and MLP up [4d]; MLP down
// 4d -> d).
enum class Kind { Qkv = 0, AttnOut = 1, MlpUp = 2, MlpDown = 3, Other = 4 };
constexpr unsigned kAllKinds = 31, kBothProducts = 3;

struct Settings {
  int64_t audit_first = 0;                // CASESTUDY_FP8_AUDIT
  int64_t audit_every = 0;                // CASESTUDY_FP8_AUDIT_EVERY (0: off)
  bool e5m2_rowwise = false;              // CASESTUDY_FP8_E5M2_GEMM=rowwise
  Bwd bwd = Bwd::Scaled;                  // CASESTUDY_FP8_BWD
  bool grad_rows = false;                 // CASESTUDY_FP8_GRAD_AXIS=row
  bool decorrelate = false;               // CASESTUDY_FP8_GRAD_DECORRELATE=1
  unsigned e5m2_products = kBothProducts;  // CASESTUDY_FP8_E5M2_FOR: bit 0 dx, bit 1 dw
  unsigned e5m2_kinds = kAllKinds;         // bit (1 << Kind)
  // Whether anything here is switched on (the forward then keeps what the
  // backward's diagnostics need).
  bool any() const {
    return audit_first > 0 || audit_every > 0 || e5m2_rowwise || bwd != Bwd::Scaled || grad_rows || decorrelate ||
           e5m2_products != kBothProducts || e5m2_kinds != kAllKinds;
  }
};

// The switches from get(name) ("" when unset; the environment in from_env).
// Throws ConfigError naming the variable and its allowed values.
Settings parse(const std::function<std::string(const char*)>& get);
Settings from_env();

Kind kind_of(int64_t in, int64_t out);
const char* kind_name(Kind k);
const char* bwd_name(Bwd b);

// Whether product (0 dX, 1 dW) of a layer of kind k takes e5m2 gradients when
// fp8.grad is e5m2.
bool e5m2_for(const Settings& s, int product, Kind k);

// a · b from FP8 operands dequantized in fp32 (a [m, k] with scales sa
// [1, 1] or [m, 1]; b [k, n] with sb [1, 1] or [1, n]).
torch::Tensor dequant_mm(const torch::Tensor& a, const torch::Tensor& sa, const torch::Tensor& b,
                         const torch::Tensor& sb);

// One product of an audited backward pass: p as computed, the operands it
// was computed from (a, b with scales sa, sb; sb undefined: b unscaled) and
// the exact product of the unquantized operands.
struct Product {
  const char* name;
  torch::Tensor p, a, b, sa, sb, exact;
};

// got against exact: |got - exact| / |exact| (rel), the component of the
// error along exact, <got - exact, exact> / <exact, exact> (gain: -0.01 is a
// result 1% too small), the mean signed error over the mean |exact| (bias),
// the share of signs that differ (signs) and got's non-finite values. In
// float64, so that gradients of 1e-12 square without underflow.
struct Error {
  double rel = 0, gain = 0, bias = 0, signs = 0;
  int64_t nonfinite = 0;
};
Error compare(const torch::Tensor& got, const torch::Tensor& exact);

// The audit line of one backward pass (no trailing newline): key=value words,
// engine/native/tools/fp8_diag.py's input:
//   fp8 audit pass=P fwd=F kind=K rows=M in=I out=O scaling=tensor|row
//   dx=e5m2|e4m3 dw=e5m2|e4m3 bwd=MODE gemm=tensorwise|rowwise
//   grad_axis=tensor|row decorrelate=0|1: dz amax=A rms=Q underflow=U
//   cast_rel=R cast_gain=G cast_bias=B; x amax=A rms=Q; w amax=A rms=Q; dx ops=E rel=R gain=G
//   bias=B signs=S nonfinite=N; dw ...
// dz: the gradient quantized; gq, ginv: its FP8 values [rows, out] and their
// scale; "underflow": the share of dz's nonzero values that became zero;
// "ops": the product against its own operands dequantized in fp32 (the GEMM).
// x, w: the layer's unquantized input [rows, in] and weight [out, in], whose
// amax and RMS the line gives too (outliers growing show as amax / RMS).
std::string audit_line(int64_t pass, int64_t fwd, Kind kind, int64_t in, bool row, const char* dx_fmt,
                       const char* dw_fmt, const Settings& s, const torch::Tensor& dz,
                       const torch::Tensor& gq, const torch::Tensor& ginv, const torch::Tensor& x,
                       const torch::Tensor& w, const std::vector<Product>& products);

}  // namespace diag
}  // namespace fp8
}  // namespace cs
