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
// And linear_act under AutocastScope(fp8) runs the FP8 path (the same values
// as fp8::linear), the bf16 path where a dimension is not a multiple of 16.
#include <torch/torch.h>

#include <iostream>
#include <string>

#include "fp8_linear.h"
#include "linear_act.h"
#include "model.h"
#include "native_test.h"
#include "precision.h"

#ifdef CS_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
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

#ifdef CS_WITH_CUDA
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
};

std::string name(const Case& c) {
  std::string s;
  for (auto d : c.xshape) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s + " -> " + std::to_string(c.out) +
         (c.scaling == fp8::Scaling::Row ? " row" : " tensor") + (c.grad_e4m3 ? " e4m3" : " e5m2");
}

int check_case(const Case& c) {
  torch::manual_seed(3);
  auto opt = torch::TensorOptions().device(torch::kCUDA);
  const int64_t in = c.xshape.back(), out = c.out;
  // bf16 activations (as a layer norm hands them on), fp32 parameters.
  auto x = torch::randn(c.xshape, opt).to(torch::kBFloat16).requires_grad_(true);
  auto w = (torch::randn({out, in}, opt) * 0.02).requires_grad_(true);
  auto b = (torch::randn({out}, opt) * 0.1).requires_grad_(true);
  std::vector<int64_t> yshape = c.xshape;
  yshape.back() = out;
  auto dy = (torch::randn(yshape, opt) * 1e-3).to(torch::kBFloat16);

  fp8::Options o;
  o.scaling = c.scaling;
  o.grad_e4m3 = c.grad_e4m3;
  fp8::Scope scope;
  CS_CHECK(fp8::active(x, w));
  auto y = fp8::linear(x, w, b, o);
  CS_CHECK(y.scalar_type() == torch::kBFloat16);
  CS_CHECK(y.sizes() == torch::IntArrayRef(yshape));
  y.backward(dy);
  CS_CHECK(x.grad().scalar_type() == torch::kBFloat16 && x.grad().sizes() == x.sizes());
  CS_CHECK(w.grad().scalar_type() == torch::kFloat && b.grad().scalar_type() == torch::kFloat);

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
  auto y_emul = torch::addmm(b.detach().to(torch::kBFloat16).to(torch::kFloat64),
                             fake_quant(xb, e4, row ? 1 : -1), fake_quant(wb, e4, row ? 1 : -1).t());
  auto dx_emul = torch::mm(fake_quant(gb, gd, row ? 1 : -1), fake_quant(wb, e4, row ? 0 : -1));
  auto dw_emul = torch::mm(fake_quant(gb, gd, row ? 0 : -1).t(), fake_quant(xb, e4, row ? 0 : -1));

  auto y2 = y.detach().reshape({-1, out}), dx2 = x.grad().reshape({-1, in});
  const double ey = rel_err(y2, y_emul), edx = rel_err(dx2, dx_emul), edw = rel_err(w.grad(), dw_emul);
  const double xy = rel_err(y2, y_exact), xdx = rel_err(dx2, dx_exact), xdw = rel_err(w.grad(), dw_exact);
  const double edb = rel_err(b.grad(), db_exact);
  std::cout << "    " << name(c) << ": vs emulation y " << ey << " dx " << edx << " dw " << edw
            << "; vs exact y " << xy << " dx " << xdx << " dw " << xdw << " db " << edb << "\n";
  CS_CHECK(ey < 1e-2 && edx < 1e-2 && edw < 1e-2);
  const double grad_hi = c.grad_e4m3 ? 0.06 : 0.10;
  CS_CHECK(xy > 5e-3 && xy < 0.06);
  CS_CHECK(xdx > 5e-3 && xdx < grad_hi);
  CS_CHECK(xdw > 5e-3 && xdw < grad_hi);
  CS_CHECK(edb < 1e-4);  // the bias gradient is a plain fp32 sum of dy
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
#ifdef CS_WITH_CUDA
  if (!torch::cuda::is_available()) return failed;
  const torch::Device gpu(torch::kCUDA, c10::cuda::current_device());
  const auto why = fp8::unsupported_reason(gpu);
  if (!why.empty()) {  // a GPU below 8.9, or an engine built without FP8
    std::cout << "  fp8_linear: FP8 not available here, refusal checked only: " << why << "\n";
    if (why.find("compute capability 8.9") == std::string::npos) failed++;
    return failed;
  }
  std::vector<Case> cases;
  for (auto s : {fp8::Scaling::Tensor, fp8::Scaling::Row})
    for (bool e4 : {false, true}) {
      cases.push_back({{256, 512}, 384, s, e4});
      cases.push_back({{4, 128, 768}, 3072, s, e4});  // GPT-2's MLP up-projection at 4 x 128
    }
  for (const auto& c : cases) failed += run_case("fp8_linear", name(c), [&] { return check_case(c); });
  failed += run_case("fp8_linear", "linear_act wiring", check_wiring);
  std::cout << "  fp8_linear cuda ok (" << cases.size() << " cases)\n";
#endif
  return failed;
}
