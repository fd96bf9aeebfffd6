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
// _scaled_mm too. Everything else (attention, layer norms, the embeddings,
// the tied head and its loss, the optimizer) stays as in bf16.
//
// Needs CUDA, compute capability ≥ 8.9 (Ada, Hopper, Blackwell) and libtorch
// ≥ 2.5 (check()); a layer whose dimensions are not multiples of 16 (the
// scaled matmul's rule), or whose input is not on CUDA, runs in bf16.
#pragma once

#include <torch/torch.h>

#include <string>

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

// x weight^T + bias through FP8 scaled matmuls (forward and backward), in
// bf16: x [..., in], weight [out, in], bias [out] (or undefined). Gradients
// come back in the dtypes of x, weight and bias. Call where active() holds.
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight,
                     const torch::Tensor& bias, const Options& o);

// The configured options.
const Options& current();

}  // namespace fp8
}  // namespace cs
