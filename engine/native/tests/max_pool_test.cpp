// max_pool_test.cpp: max_pool (src/max_pool.h) against torch::max_pool2d on
// the same bf16/fp16 inputs: the outputs equal bit for bit (a maximum is
// exact, ties go to the first in the window as in PyTorch), the input
// gradients within twice the error of PyTorch's own against a float64
// reference; inputs with many ties (few distinct values), odd sizes,
// windows that overhang every edge, strides over the window, and ResNet-50's
// stem at micro-batches 256 and 384.
#include <torch/torch.h>

#include <iostream>
#include <string>

#include "kernels.h"
#include "max_pool.h"
#include "native_test.h"

using namespace cs;

namespace {

struct Case {
  int64_t N, C, H, W, k, s, p;
  at::ScalarType t;
  bool ties;  // values from a small set: many equal maxima in a window
};

std::string name(const Case& c) {
  return std::to_string(c.N) + "x" + std::to_string(c.C) + "x" + std::to_string(c.H) + "x" +
         std::to_string(c.W) + " k" + std::to_string(c.k) + " s" + std::to_string(c.s) + " p" +
         std::to_string(c.p) + " " + c10::toString(c.t) + (c.ties ? " ties" : "");
}

// y and dx of max pooling (the engine's op, or torch::max_pool2d when ref).
std::pair<torch::Tensor, torch::Tensor> run(bool ref, const Case& c, const torch::Tensor& x0,
                                            const torch::Tensor& gy) {
  auto x = x0.clone(at::MemoryFormat::ChannelsLast).requires_grad_(true);
  auto y = ref ? torch::max_pool2d(x, c.k, c.s, c.p) : max_pool(x, c.k, c.s, c.p);
  y.backward(gy.to(y.scalar_type()));
  return {y.detach(), x.grad()};
}

int check_case(const Case& c, torch::Device dev) {
  torch::manual_seed(uint64_t(c.N * 7 + c.C * 13 + c.H));
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(dev);
  auto x = c.ties ? torch::randint(-3, 4, {c.N, c.C, c.H, c.W}, f32) : torch::randn({c.N, c.C, c.H, c.W}, f32);
  x = x.to(c.t).contiguous(at::MemoryFormat::ChannelsLast);
  const int64_t Ho = (c.H + 2 * c.p - c.k) / c.s + 1, Wo = (c.W + 2 * c.p - c.k) / c.s + 1;
  auto gy = torch::randn({c.N, c.C, Ho, Wo}, f32).to(c.t).contiguous(at::MemoryFormat::ChannelsLast);
  kernels::set_for_tests("pool");
  CS_CHECK(max_pool_fused(x, c.k, c.s, c.p));
  auto got = run(false, c, x, gy);
  auto again = run(false, c, x, gy);
  kernels::set_for_tests("native");
  auto torch_ = run(true, c, x, gy);
  kernels::set_for_tests("");
  // float64 reference of the gradient: the same maxima (ties alike), sums exact.
  auto x64 = x.to(torch::kFloat64).requires_grad_(true);
  auto y64 = torch::max_pool2d(x64, c.k, c.s, c.p);
  y64.backward(gy.to(torch::kFloat64));
  CS_CHECK(got.first.scalar_type() == c.t && got.first.is_contiguous(at::MemoryFormat::ChannelsLast));
  CS_CHECK(torch::equal(got.first, torch_.first));
  const double e = rel_err(got.second, x64.grad()), floor = rel_err(torch_.second, x64.grad());
  if (!(e <= 2 * floor + 1e-12)) {
    std::cerr << "FAIL max_pool " << name(c) << ": dx error " << e << " > 2 x PyTorch's " << floor
              << "\n";
    return 1;
  }
  CS_CHECK(torch::equal(got.second, again.second));
  return 0;
}

}  // namespace

int max_pool_tests() {
  const auto B = torch::kBFloat16, H = torch::kHalf;
  std::vector<Case> cases = {
      {2, 8, 9, 9, 3, 2, 1, B, false},   {3, 16, 8, 7, 3, 2, 1, B, true},
      {2, 24, 5, 6, 2, 2, 0, H, true},   {1, 8, 11, 11, 3, 1, 1, H, false},
      {2, 64, 7, 9, 4, 3, 2, B, true},
      // Stride over the window: rows and columns in no window (a zero gradient).
      {2, 16, 10, 11, 2, 3, 0, B, true},
  };
  // The pool kernels' host version through the same autograd function as on
  // the GPU, against torch::max_pool2d on the CPU (bf16: libtorch 1.13's CPU
  // has no fp16 max pooling).
  {
    HostKernels host;
    for (const auto& c : cases) {
      if (c.t == H) continue;
      if (int rc = run_case("max_pool", name(c) + " (cpu, host version)", [&] { return check_case(c, torch::kCPU); }))
        return rc;
    }
  }
  std::cout << "  max_pool pool kernels' host version cpu ok\n";
  if (!torch::cuda::is_available() || !kernels::compiled()) {
    std::cout << "  max_pool: no CUDA kernels here (the portable path is torch::max_pool2d)\n";
    return 0;
  }
  cases.push_back({256, 64, 112, 112, 3, 2, 1, B, false});  // ResNet-50's stem
  cases.push_back({256, 64, 112, 112, 3, 2, 1, H, true});
  cases.push_back({384, 64, 112, 112, 3, 2, 1, B, false});  // issue 41's micro-batch
  // On CUDA the backward of a window at most twice its stride (each input in
  // at most 2 x 2 windows: 3/2/1, 2/2/0, 4/3/2, 2/3/0) gathers every window at
  // once (max_pool_bwd2_kernel); 3/1/1 takes the general kernel.
  const torch::Device dev(torch::kCUDA, 0);
  for (const auto& c : cases) {
    if (int rc = run_case("max_pool", name(c), [&] { return check_case(c, dev); })) return rc;
  }
  std::cout << "  max_pool pool kernels cuda ok (" << cases.size() << " cases)\n";
  return 0;
}
