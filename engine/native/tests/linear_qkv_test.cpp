// linear_qkv_test.cpp: linear_qkv (src/linear_act.h) with the "qkv" kernel
// against the path it replaces, linear_act with the "lin" kernel and unbind:
// q, k, v and every gradient bit for bit equal (the kernel writes the same dz
// and sums it in the same order as "lin" does), and the bias gradient within
// fp32 rounding of the float64 column sum of the stacked q, k, v gradients.
// The three gradients come in three layouts (contiguous [B, H, T, D], [B, T,
// H, D] as cuDNN's attention writes them, and one whose last stride is not 1),
// and in one case an output takes no part in the loss (no gradient: zeros).
// On the CPU the kernel's host version runs under the same autograd function;
// on CUDA also the real shapes of GPT-2 124M (16 x 1024, 12 heads) and
// BERT-large (32 x 512, 16 heads), fp16, and a head size off the vector path.
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
  int64_t B, T, in, heads, D;
  at::ScalarType dt;  // the autocast dtype
  bool k_unused;      // k takes no part in the loss
};

std::string name(const Case& c) {
  return std::to_string(c.B) + "x" + std::to_string(c.T) + "x" + std::to_string(c.in) + " " +
         std::to_string(c.heads) + " heads of " + std::to_string(c.D) + " " + c10::toString(c.dt) +
         (c.k_unused ? " (k unused)" : "");
}

struct Out {
  std::vector<torch::Tensor> qkv;
  torch::Tensor dx, dw, db;
};

// One forward and backward of linear_qkv under autocast with the kernels as
// named (CASESTUDY_KERNELS syntax), the outputs' gradients given as grads.
Out run(const Case& c, const char* kernels_on, bool fused, const torch::Tensor& x0,
        const torch::Tensor& w0, const torch::Tensor& b0, const std::vector<torch::Tensor>& grads) {
  kernels::set_for_tests(kernels_on);
  auto x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true),
       b = b0.clone().requires_grad_(true);
  const auto dev = x.device().type();
  compat::set_autocast(dev, true, c.dt);
  const bool on = linear_qkv_fused(x, w, c.heads);
  auto o = linear_qkv(x, w, b, c.heads);
  compat::set_autocast(dev, false, c.dt);
  at::autocast::clear_cache();
  TORCH_CHECK(on == fused, "linear_qkv_fused: ", on, " with kernels ", kernels_on);
  std::vector<torch::Tensor> outs, gs;
  for (int s = 0; s < 3; s++) {
    TORCH_CHECK(o[s].sizes() == torch::IntArrayRef({c.B, c.heads, c.T, c.D}) &&
                    o[s].scalar_type() == c.dt,
                "linear_qkv: output ", s, " shape or dtype");
    if (s == 1 && c.k_unused) continue;
    outs.push_back(o[s]);
    gs.push_back(grads[s]);
  }
  torch::autograd::backward(outs, gs);
  kernels::set_for_tests("");
  return {{o[0].detach(), o[1].detach(), o[2].detach()}, x.grad(), w.grad(), b.grad()};
}

int check_case(const Case& c, torch::Device dev) {
  const int64_t d = c.heads * c.D, rows = c.B * c.T;
  torch::manual_seed(uint64_t(rows * 31 + c.in * 7 + d));
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(dev);
  auto x = torch::randn({c.B, c.T, c.in}, f32);
  auto w = torch::randn({3 * d, c.in}, f32) / std::sqrt(double(c.in));
  auto b = 0.5 * torch::randn({3 * d}, f32);
  const std::vector<torch::Tensor> grads = {
      torch::randn({c.B, c.heads, c.T, c.D}, f32).to(c.dt),
      torch::randn({c.B, c.T, c.heads, c.D}, f32).to(c.dt).transpose(1, 2),
      torch::randn({c.B, c.heads, c.D, c.T}, f32).to(c.dt).transpose(2, 3)};

  auto base = run(c, "lin", false, x, w, b, grads);
  auto got = run(c, "lin,qkv", true, x, w, b, grads);
  auto again = run(c, "lin,qkv", true, x, w, b, grads);
  for (int s = 0; s < 3; s++) CS_CHECK(torch::equal(got.qkv[s], base.qkv[s]));
  for (auto [g, want] : {std::pair{got.dx, base.dx}, {got.dw, base.dw}, {got.db, base.db},
                         {again.dx, got.dx}, {again.dw, got.dw}, {again.db, got.db}}) {
    CS_CHECK(g.defined() && want.defined());
    CS_CHECK(g.scalar_type() == want.scalar_type() && torch::equal(g, want));
  }
  // The bias gradient against the float64 sum over the rows of the stacked
  // gradients (k's zero when unused).
  std::vector<torch::Tensor> parts;
  for (int s = 0; s < 3; s++)
    parts.push_back((s == 1 && c.k_unused ? torch::zeros_like(grads[s]) : grads[s]).transpose(1, 2));
  auto db_ref = torch::stack(parts, 2).reshape({rows, 3 * d}).to(torch::kFloat64).sum(0);
  const double e = rel_err(got.db, db_ref), bound = 4 * std::sqrt(double(rows)) * std::ldexp(1.0, -24);
  if (!(e <= bound)) {
    std::cerr << "FAIL linear_qkv " << name(c) << ": bias gradient error " << e << " > " << bound << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

int linear_qkv_tests() {
  const auto B = torch::kBFloat16, H = torch::kHalf;
  std::vector<Case> cases = {
      {2, 5, 16, 2, 8, B, false},
      {1, 7, 12, 3, 4, B, false},  // a head of 4: the scalar path on CUDA
      {3, 4, 24, 2, 8, B, true},
  };
  auto check = [](const Case& c, torch::Device dev) {
    return run_case("linear_qkv", name(c) + " (" + dev.str() + ")", [&] { return check_case(c, dev); });
  };
  {
    HostKernels host;
    for (const auto& c : cases)
      if (int rc = check(c, torch::kCPU)) return rc;
  }
  std::cout << "  linear_qkv cpu ok (the qkv kernel's host version)\n";
  if (!torch::cuda::is_available()) return 0;
  if (!kernels::compiled()) {
    std::cout << "  linear_qkv: no CUDA kernels in this build\n";
    return 0;
  }
  cases.push_back({2, 64, 64, 4, 16, H, false});
  cases.push_back({16, 1024, 768, 12, 64, B, false});  // GPT-2 124M
  cases.push_back({32, 512, 1024, 16, 64, B, false});  // BERT-large
  const torch::Device dev(torch::kCUDA, 0);
  for (const auto& c : cases)
    if (int rc = check(c, dev)) return rc;
  std::cout << "  linear_qkv qkv kernel cuda ok (" << cases.size() << " cases)\n";
  return 0;
}
