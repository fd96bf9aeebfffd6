// linear_act_test.cpp: linear_act (src/linear_act.h) against a float64
// reference (the linear layer and GELU on the inputs rounded to the autocast
// dtype, as autocast rounds them, and their gradients in float64), forward and
// backward, under bf16 autocast (fp16 too on CUDA), GELU tanh and erf and no
// activation, row lengths that take the kernel's vector and scalar paths, 2-D
// and 3-D inputs, an input that needs no gradient, and on CUDA the real
// shapes of GPT-2 124M at 16 x 1024 tokens and BERT-large at 32 x 512. The
// "lin" kernel's errors must stay within twice those of the portable path
// (torch::linear + torch::gelu under autocast: its bias gradient is rounded to
// the autocast dtype, the kernel's is not) plus fp32's rounding of a sum over
// the rows; on the CPU the kernel's host version runs (kernels.h), so the
// autograd function around it is checked there too.
#include <torch/torch.h>

#include <cmath>
#include <iostream>
#include <string>

#include "compat.h"
#include "kernels.h"
#include "linear_act.h"
#include "native_test.h"

using namespace cs;

namespace {

struct Case {
  std::vector<int64_t> xshape;  // [..., in]
  int64_t out;
  Act act;
  at::ScalarType dt;  // the autocast dtype
  bool x_grad;        // whether x needs a gradient
};

std::string name(const Case& c) {
  std::string s;
  for (auto d : c.xshape) s += (s.empty() ? "" : "x") + std::to_string(d);
  const char* a = c.act == Act::None ? "none" : c.act == Act::GeluTanh ? "gelu-tanh" : "gelu-erf";
  return s + " -> " + std::to_string(c.out) + " " + a + " " + c10::toString(c.dt) +
         (c.x_grad ? "" : " (x without grad)");
}

struct Out {
  torch::Tensor y, dx, dw, db;
};

// One forward and backward: the float64 reference (ref), or linear_act under
// autocast (the kernel's or the portable path, as the switch says).
Out run(bool ref, const Case& c, const torch::Tensor& x0, const torch::Tensor& w0,
        const torch::Tensor& b0, const torch::Tensor& gy) {
  const auto f64 = torch::kFloat64;
  auto leaf = [&](const torch::Tensor& t, bool grad) {
    return (ref ? t.to(c.dt).to(f64) : t.clone()).requires_grad_(grad);
  };
  auto x = leaf(x0, c.x_grad), w = leaf(w0, true), b = leaf(b0, true);
  torch::Tensor y;
  if (ref) {
    y = torch::linear(x, w, b);
    if (c.act != Act::None) y = torch::gelu(y, c.act == Act::GeluTanh ? "tanh" : "none");
    y.backward(gy.to(f64));
  } else {
    const auto dev = x.device().type();
    compat::set_autocast(dev, true, c.dt);
    y = linear_act(x, w, b, c.act);
    compat::set_autocast(dev, false, c.dt);
    at::autocast::clear_cache();
    TORCH_CHECK(y.scalar_type() == c.dt, "linear_act: output dtype");
    y.backward(gy);
    TORCH_CHECK(w.grad().scalar_type() == w.scalar_type() && b.grad().scalar_type() == b.scalar_type(),
                "linear_act: gradient dtypes");
  }
  return {y.detach(), c.x_grad ? x.grad() : torch::Tensor(), w.grad(), b.grad()};
}

int check_case(const Case& c, torch::Device dev, bool kernel) {
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < c.xshape.size(); i++) rows *= c.xshape[i];
  const int64_t in = c.xshape.back();
  torch::manual_seed(uint64_t(rows * 17 + in * 5 + c.out));
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(dev);
  auto x = torch::randn(c.xshape, f32);
  auto w = torch::randn({c.out, in}, f32) / std::sqrt(double(in));
  auto b = 0.5 * torch::randn({c.out}, f32);
  auto yshape = c.xshape;
  yshape.back() = c.out;
  auto gy = torch::randn(yshape, f32).to(c.dt);

  auto ref = run(true, c, x, w, b, gy);
  kernels::set_for_tests("native");
  CS_CHECK(!linear_act_fused(x, w));
  auto portable = run(false, c, x, w, b, gy);
  kernels::set_for_tests("lin");
  compat::set_autocast(dev.type(), true, c.dt);
  const bool fused = linear_act_fused(x, w);
  compat::set_autocast(dev.type(), false, c.dt);
  CS_CHECK(fused == kernel);
  if (!kernel) {
    kernels::set_for_tests("");
    return 0;
  }
  CS_CHECK(!linear_act_fused(x, w));  // without autocast: the portable path
  auto got = run(false, c, x, w, b, gy);
  auto again = run(false, c, x, w, b, gy);
  kernels::set_for_tests("");
  struct Cmp {
    const char* what;
    torch::Tensor got, portable, ref;
  };
  std::vector<Cmp> cmps{{"y", got.y, portable.y, ref.y},
                        {"dw", got.dw, portable.dw, ref.dw},
                        {"db", got.db, portable.db, ref.db}};
  if (c.x_grad) cmps.push_back({"dx", got.dx, portable.dx, ref.dx});
  else CS_CHECK(!got.dx.defined());
  for (const auto& m : cmps) {
    CS_CHECK(m.got.defined() && m.portable.defined());
    CS_CHECK(m.got.sizes() == m.ref.sizes() && m.got.scalar_type() == m.portable.scalar_type());
    const double e = rel_err(m.got, m.ref), floor = rel_err(m.portable, m.ref);
    if (!(e <= 2 * floor + std::sqrt(double(rows)) * std::ldexp(1.0, -24))) {
      std::cerr << "FAIL linear_act " << name(c) << ": " << m.what << " error " << e
                << " > 2 x the portable path's " << floor << "\n";
      return 1;
    }
  }
  // Deterministic: the same inputs give the same bits.
  CS_CHECK(torch::equal(got.y, again.y) && torch::equal(got.dw, again.dw) &&
           torch::equal(got.db, again.db));
  return 0;
}

}  // namespace

int linear_act_tests() {
  const auto B = torch::kBFloat16, H = torch::kHalf;
  std::vector<Case> cases = {
      {{37, 16}, 64, Act::GeluTanh, B, true},
      {{37, 16}, 64, Act::GeluErf, B, true},
      {{2, 19, 24}, 96, Act::None, B, true},  // 3-D, as the blocks call it
      {{37, 16}, 100, Act::GeluTanh, B, true},  // a row of 100: the scalar path
      {{5, 8}, 8, Act::None, B, false},
      {{64, 32}, 48, Act::GeluErf, H, true},
  };
  auto check = [](const Case& c, torch::Device dev, bool kernel) {
    return run_case("linear_act", name(c) + " (" + dev.str() + ")", [&] { return check_case(c, dev, kernel); });
  };
  // The portable path on the CPU, then the kernel's host version under the same
  // autograd function the GPU runs (no fp16 autocast on libtorch 1.13's CPU).
  for (bool host : {false, true}) {
    HostKernels mode(host);
    for (const auto& c : cases) {
      if (c.dt == H && !CS_HAS_CPU_FP16_AUTOCAST) continue;
      if (int rc = check(c, torch::kCPU, host)) return rc;
    }
  }
  std::cout << "  linear_act cpu ok (portable, and the lin kernel's host version)\n";
  if (!torch::cuda::is_available()) return 0;
  if (!kernels::compiled()) {
    std::cout << "  linear_act: no CUDA kernels in this build\n";
    return 0;
  }
  // GPT-2 124M at 16 x 1024 tokens (qkv, MLP in and out), BERT-large at 32 x 512.
  cases.push_back({{16, 1024, 768}, 2304, Act::None, B, true});
  cases.push_back({{16, 1024, 768}, 3072, Act::GeluTanh, B, true});
  cases.push_back({{16, 1024, 3072}, 768, Act::None, B, true});
  cases.push_back({{32, 512, 1024}, 4096, Act::GeluErf, B, true});
  cases.push_back({{16, 1024, 768}, 3072, Act::GeluTanh, H, true});
  const torch::Device dev(torch::kCUDA, 0);
  for (const auto& c : cases)
    if (int rc = check(c, dev, true)) return rc;
  std::cout << "  linear_act lin kernel cuda ok (" << cases.size() << " cases)\n";
  return 0;
}
