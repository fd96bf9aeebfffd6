// fp8_linear.h: precision fp8, the linear layers' matrix products in FP8.
//
// Under precision fp8 the trainer runs bf16 autocast (as precision bf16) and
// switches FP8 on for the forward pass (fp8::Scope, from AutocastScope): the
// transformer blocks' linear layers of GPT and BERT (linear_act, linear_qkv)
// then quantize their input and weight to float8 e4m3 with a scale from the
// current amax (dynamic scaling: per tensor, or per row of each operand) and
// multiply them with libtorch's scaled matrix multiply (at::_scaled_mm, FP8
// tensor cores, output in bf16). The backward quantizes the output gradient
// to e5m2 (or e4m3, fp8.grad) and computes dX = dY W and dW = dY^T X through
// _scaled_mm too. The quantization runs the engine's fp8cast kernels where
// built (kernels.h; amax, then scale and cast writing the row-major and the
// transposed copy from one read), else ATen ops. Everything else (attention, layer norms, the embeddings,
// the tied head and its loss, the optimizer) stays as in bf16.
//
// Needs CUDA, compute capability ≥ 8.9 (Ada, Hopper, Blackwell) and libtorch
// ≥ 2.5 (check()); a layer whose dimensions are not multiples of 16 (the
// scaled matmul's rule), or whose input is not on CUDA, runs in bf16.
#pragma once

#include <torch/torch.h>

#include <string>

#include "cuda/dtype.h"

namespace cs {
namespace fp8 {

enum class Scaling { Tensor, Row };

struct Options {
  Scaling scaling = Scaling::Tensor;
  bool grad_e4m3 = false;  // gradients in e4m3 instead of e5m2
};

// Parses fp8.scaling (tensor | row) and fp8.grad (e5m2 | e4m3) as config.cpp
// validated them.
Options options(const std::string& scaling, const std::string& grad);

// Why precision fp8 cannot run on d ("" when it can): the CPU, a GPU below
// compute capability 8.9, a libtorch without the scaled matmul.
std::string unsupported_reason(const torch::Device& d);

// Sets the options every Scope uses from now on (the trainer, at init, from
// the config's fp8.scaling and fp8.grad).
void configure(const Options& o);

// Switches FP8 on for the linear layers on this thread while it lives, with
// the configured options (the thread-local state nests, as autocast's does).
class Scope {
 public:
  Scope();
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  bool prev_on_;
};

// Whether a Scope is live on this thread.
bool on();

// Whether linear(x, weight, bias) runs in FP8 here: a Scope live on this
// thread, x and weight on one CUDA device, weight [out, in] with out and in
// multiples of 16 and x's rows (numel / in) a multiple of 16.
bool active(const torch::Tensor& x, const torch::Tensor& weight);

// act(x weight^T + bias) through FP8 scaled matmuls (forward and backward),
// in bf16: x [..., in], weight [out, in], bias [out] (or undefined); act None
// or a GELU, whose backward runs with the bias gradient's sum in the "lin"
// kernel where it runs (as linear_act's bf16 path). Gradients come back in
// the dtypes of x, weight and bias. Call where active() holds.
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight,
                     const torch::Tensor& bias, const Options& o, kern::Act act = kern::Act::None);

// The quantization of one operand (dynamic scaling): the amax of t (2-D,
// bf16, fp16 or fp32) over all of it (Tensor), each row (Rows) or each column
// (Cols) maps to the format's largest finite value (448 e4m3, 57344 e5m2):
// q = t * scale in FP8, row-major [rows, cols] (want_q), qt its transpose
// [cols, rows] row-major (want_qt; _scaled_mm's column-major operand is
// qt.t()), inv = 1 / scale ([1, 1], [rows, 1] or [1, cols], fp32), with
// t ~ q * inv. With the "fp8cast" kernels (fused_quantize) two reads of t,
// the scale never leaving the device; else ATen ops (their reference, bit
// for bit the same q and qt). CUDA with the scaled matmul only (else throws
// UnsupportedError).
enum class Axis { Tensor = 0, Rows = 1, Cols = 2 };
struct Quantized {
  torch::Tensor q, qt, inv;
};
Quantized quantize(const torch::Tensor& t, bool e5m2, Axis axis, bool want_q, bool want_qt);

// Whether quantize(t, ...) runs the fp8cast kernels: built with the engine's
// CUDA kernels, "fp8cast" switched on (CASESTUDY_KERNELS), t 2-D on CUDA in
// bf16, fp16 or fp32.
bool fused_quantize(const torch::Tensor& t);

// The configured options.
const Options& current();

}  // namespace fp8
}  // namespace cs
