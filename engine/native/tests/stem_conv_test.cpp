// stem_conv_test.cpp: stem_conv (src/stem_conv.h) against torch::conv2d on the
// same inputs: when it runs as a matrix product (the switch, the memory
// format, an input without a gradient) and its K, and the output and the
// weight gradient within twice the error of PyTorch's own convolution against
// a float64 reference: fp32 and bf16 (CPU autocast) on the CPU through the
// host path, odd sizes and strides, bf16 and fp16 under CUDA autocast at
// ResNet-50's stem shape on a GPU; and the rows gather kernel (or its host
// version) against libtorch's gather, bit for bit.
#include <torch/torch.h>

#include <iostream>
#include <string>
#include <vector>

#include "compat.h"
#include "kernels.h"
#include "native_test.h"
#include "stem_conv.h"

using namespace cs;

namespace {

struct Case {
  int64_t N, cout, H, W, k, stride, pad;
  at::ScalarType t;  // the autocast dtype, fp32 for none
};

std::string name(const Case& c) {
  return std::to_string(c.N) + "x3x" + std::to_string(c.H) + "x" + std::to_string(c.W) + " -> " +
         std::to_string(c.cout) + " k" + std::to_string(c.k) + " s" + std::to_string(c.stride) +
         " p" + std::to_string(c.pad) + " " + c10::toString(c.t);
}

// y and the weight gradient of the convolution (stem_conv with the "stem"
// switch as given), autocast on in c.t unless fp32.
std::pair<torch::Tensor, torch::Tensor> run(const std::string& sw, const Case& c,
                                            const torch::Tensor& x, const torch::Tensor& w0,
                                            const torch::Tensor& gy, bool* as_gemm) {
  kernels::set_for_tests(sw);
  const auto dev = x.device().type();
  const bool ac = c.t != torch::kFloat32;
  if (ac) compat::set_autocast(dev, true, c.t);
  auto w = w0.detach().clone(at::MemoryFormat::ChannelsLast).requires_grad_(true);
  auto y = stem_conv(x, w, c.stride, c.pad);
  if (as_gemm) *as_gemm = stem_conv_as_gemm(x, w);
  if (ac) compat::set_autocast(dev, false, c.t);
  y.backward(gy.to(y.scalar_type()));
  kernels::set_for_tests("");
  return {y.detach(), w.grad()};
}

int check_case(const Case& c, torch::Device dev) {
  torch::manual_seed(uint64_t(c.N * 7 + c.H));
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(dev);
  const auto cl = at::MemoryFormat::ChannelsLast;
  auto x = torch::randn({c.N, 3, c.H, c.W}, f32).contiguous(cl);
  auto w = (torch::randn({c.cout, 3, c.k, c.k}, f32) * 0.1).contiguous(cl);
  const int64_t Ho = (c.H + 2 * c.pad - c.k) / c.stride + 1, Wo = (c.W + 2 * c.pad - c.k) / c.stride + 1;
  auto gy = torch::randn({c.N, c.cout, Ho, Wo}, f32).contiguous(cl);
  bool as_gemm = false;
  auto got = run("stem", c, x, w, gy, &as_gemm);
  auto ref = run("native", c, x, w, gy, nullptr);
  CS_CHECK(as_gemm);
  CS_CHECK(got.first.sizes() == ref.first.sizes() && got.first.scalar_type() == ref.first.scalar_type());
  CS_CHECK(got.first.is_contiguous(cl));
  CS_CHECK(got.second.sizes() == w.sizes() && got.second.scalar_type() == torch::kFloat32);
  // float64 reference from the inputs as the convolution sees them (cast to c.t).
  auto x64 = x.to(c.t).to(torch::kFloat64);
  auto w64 = w.to(c.t).to(torch::kFloat64).requires_grad_(true);
  auto y64 = torch::conv2d(x64, w64, {}, {c.stride, c.stride}, {c.pad, c.pad});
  y64.backward(gy.to(ref.first.scalar_type()).to(torch::kFloat64));
  const double ey = rel_err(got.first, y64), fy = rel_err(ref.first, y64);
  const double ew = rel_err(got.second, w64.grad()), fw = rel_err(ref.second, w64.grad());
  if (!(ey <= 2 * fy + 1e-12) || !(ew <= 2 * fw + 1e-12)) {
    std::cerr << "FAIL stem_conv " << name(c) << ": y error " << ey << " (PyTorch's " << fy
              << "), weight gradient error " << ew << " (PyTorch's " << fw << ")\n";
    return 1;
  }
  return 0;
}

int check(const Case& c, torch::Device dev) {
  return run_case("stem_conv", name(c) + " (" + dev.str() + ")", [&] { return check_case(c, dev); });
}

// When stem_conv runs as a matrix product: channels_last inputs without a
// gradient, with the switch on and where the kernels run; and its K.
int check_when() {
  const auto cl = at::MemoryFormat::ChannelsLast;
  auto x = torch::randn({2, 3, 8, 8}).contiguous(cl);
  auto w = torch::randn({4, 3, 7, 7});
  CS_CHECK(stem_conv_k(7, 3, 2) == 168 && stem_conv_k(7, 3, 4) == 168 && stem_conv_k(3, 8, 2) == 72);
  CS_CHECK(stem_conv_k(3, 3, 2) == 72 && stem_conv_k(1, 8, 2) == 8);
  kernels::set_for_tests("stem");
  CS_CHECK(!stem_conv_as_gemm(x, w));  // CPU tensors only under set_host_for_tests
  HostKernels host;
  CS_CHECK(stem_conv_as_gemm(x, w));
  CS_CHECK(!stem_conv_as_gemm(torch::randn({2, 3, 8, 8}), w));                     // NCHW
  CS_CHECK(!stem_conv_as_gemm(x.clone().requires_grad_(true), w));                 // needs dx
  CS_CHECK(!stem_conv_as_gemm(x, torch::randn({4, 3, 7, 5})));                     // not square
  kernels::set_for_tests("-stem");
  CS_CHECK(!stem_conv_as_gemm(x, w));
  kernels::set_for_tests("");
  return 0;
}

// The gather kernel's rows (CUDA, or its host version) equal libtorch's
// padding and strided copy bit for bit: fp32 and bf16 images into each
// product dtype, borders, widened windows, strides 1 to 3; on CUDA the
// tiled kernel, and the direct one where the tile exceeds 48 KB (k 1, stride
// 49: 85 pixels a tile, 4124 image columns).
int check_rows(torch::Device dev) {
  struct R {
    int64_t N, H, W, k, s, p;
  };
  const auto cl = at::MemoryFormat::ChannelsLast;
  std::vector<R> shapes = {R{2, 20, 20, 7, 2, 3}, R{3, 15, 13, 3, 1, 1}, R{2, 9, 11, 5, 3, 0},
                           R{1, 7, 7, 7, 2, 3},   R{2, 33, 31, 7, 2, 3}, R{1, 100, 100, 1, 49, 0}};
  if (dev.is_cuda()) shapes.push_back(R{256, 224, 224, 7, 2, 3});  // ResNet-50's stem
  for (const R& r : shapes)
    for (auto tx : {torch::kFloat32, torch::kBFloat16})
      for (auto t : {torch::kFloat32, torch::kBFloat16, torch::kHalf}) {
        auto x = (torch::randn({r.N, 3, r.H, r.W}, torch::TensorOptions().device(dev)) * 3).to(tx).contiguous(cl);
        const int64_t K = stem_conv_k(r.k, 3, int64_t(c10::elementSize(t)));
        if (K % 8 != 0) continue;  // the kernel's condition (stem_conv falls back)
        auto got = stem_conv_rows(x, r.k, r.s, r.p, t, true);
        auto want = stem_conv_rows(x, r.k, r.s, r.p, t, false);
        const int64_t Ho = (r.H + 2 * r.p - r.k) / r.s + 1, Wo = (r.W + 2 * r.p - r.k) / r.s + 1;
        CS_CHECK(got.sizes() == want.sizes() && got.size(0) == r.N * Ho * Wo && got.size(1) == K);
        CS_CHECK(got.scalar_type() == t && torch::equal(got, want));
      }
  return 0;
}

}  // namespace

int stem_conv_tests() {
  if (int rc = check_when()) return rc;
  // The matrix-product path on the CPU (host mode): fp32, and bf16 under CPU autocast.
  {
    HostKernels host;
    for (const Case& c : {Case{2, 8, 20, 20, 7, 2, 3, torch::kFloat32}, Case{3, 16, 15, 13, 3, 1, 1, torch::kFloat32},
                          Case{2, 8, 21, 18, 7, 2, 3, torch::kBFloat16}, Case{2, 8, 9, 11, 5, 3, 0, torch::kFloat32},
                          Case{1, 4, 7, 7, 7, 2, 3, torch::kFloat32}})
      if (int rc = check(c, torch::kCPU)) return rc;
  }
  {
    HostKernels host;
    if (int rc = run_case("stem_conv", "rows (cpu)", [] { return check_rows(torch::kCPU); })) return rc;
  }
  std::cout << "  stem_conv as a matrix product cpu ok (the rows kernel's host version too)\n";
  if (!torch::cuda::is_available() || !kernels::compiled()) {
    std::cout << "  stem_conv: no CUDA kernels here (the portable path is torch::conv2d)\n";
    return 0;
  }
  const torch::Device dev(torch::kCUDA, 0);
  // ResNet-50's stem at micro-batch 256, 224 pixels, and a small one.
  for (const Case& c : {Case{256, 64, 224, 224, 7, 2, 3, torch::kBFloat16}, Case{256, 64, 224, 224, 7, 2, 3, torch::kHalf},
                        Case{4, 8, 32, 30, 7, 2, 3, torch::kBFloat16}, Case{4, 8, 32, 32, 7, 2, 3, torch::kFloat32}})
    if (int rc = check(c, dev)) return rc;
  if (int rc = run_case("stem_conv", "rows (cuda)", [&] { return check_rows(dev); })) return rc;
  std::cout << "  stem_conv as a matrix product cuda ok (the rows kernel too)\n";
  return 0;
}
