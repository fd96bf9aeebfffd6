// stem_conv_test.cpp: stem_conv (src/stem_conv.h) against torch::conv2d on the
// same inputs: which inputs it pads (the switch, the memory format, the
// dtype the convolution runs in: under autocast its dtype), and the output
// and the weight gradient within twice the error of PyTorch's own unpadded
// convolution against a float64 reference: fp32 and bf16 (CPU autocast) on
// the CPU through the host path, bf16 and fp16 under CUDA autocast at
// ResNet-50's stem shape on a GPU.
#include <torch/torch.h>

#include <iostream>
#include <string>

#include "compat.h"
#include "kernels.h"
#include "native_test.h"
#include "stem_conv.h"

using namespace cs;

namespace {

struct Case {
  int64_t N, cout, H, k, stride, pad;
  at::ScalarType t;  // the autocast dtype, fp32 for none
};

std::string name(const Case& c) {
  return std::to_string(c.N) + "x3x" + std::to_string(c.H) + " -> " + std::to_string(c.cout) +
         " k" + std::to_string(c.k) + " s" + std::to_string(c.stride) + " " + c10::toString(c.t);
}

// y and the weight gradient of the convolution (stem_conv with the "stem"
// switch as given), autocast on in c.t unless fp32.
std::pair<torch::Tensor, torch::Tensor> run(const std::string& sw, const Case& c,
                                            const torch::Tensor& x, const torch::Tensor& w0,
                                            const torch::Tensor& gy, int64_t* channels) {
  kernels::set_for_tests(sw);
  const auto dev = x.device().type();
  const bool ac = c.t != torch::kFloat32;
  if (ac) compat::set_autocast(dev, true, c.t);
  auto w = w0.detach().clone(at::MemoryFormat::ChannelsLast).requires_grad_(true);
  auto y = stem_conv(x, w, c.stride, c.pad);
  if (channels) *channels = stem_conv_channels(x);
  if (ac) compat::set_autocast(dev, false, c.t);
  y.backward(gy.to(y.scalar_type()));
  kernels::set_for_tests("");
  return {y.detach(), w.grad()};
}

int check_case(const Case& c, torch::Device dev) {
  torch::manual_seed(uint64_t(c.N * 7 + c.H));
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(dev);
  const auto cl = at::MemoryFormat::ChannelsLast;
  auto x = torch::randn({c.N, 3, c.H, c.H}, f32).contiguous(cl);
  auto w = (torch::randn({c.cout, 3, c.k, c.k}, f32) * 0.1).contiguous(cl);
  const int64_t Ho = (c.H + 2 * c.pad - c.k) / c.stride + 1;
  auto gy = torch::randn({c.N, c.cout, Ho, Ho}, f32).contiguous(cl);
  int64_t channels = 0;
  auto got = run("stem", c, x, w, gy, &channels);
  auto ref = run("native", c, x, w, gy, nullptr);
  CS_CHECK(channels == (c.t == torch::kFloat32 ? 4 : 8));
  CS_CHECK(got.first.sizes() == ref.first.sizes() && got.first.scalar_type() == ref.first.scalar_type());
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
  int rc = 1;
  try {
    rc = check_case(c, dev);
  } catch (const std::exception& e) {
    std::cerr << "FAIL stem_conv: " << e.what() << "\n";
  }
  if (rc) std::cerr << "  case " << name(c) << " (" << dev << ")\n";
  return rc;
}

// Which inputs are padded: only channels_last ones with fewer channels than a
// 16-byte row, with the switch on and where the kernels run.
int check_when() {
  const auto cl = at::MemoryFormat::ChannelsLast;
  auto x = torch::randn({2, 3, 8, 8}).contiguous(cl);
  kernels::set_for_tests("stem");
  CS_CHECK(!stem_conv_padded(x));  // CPU tensors only under set_host_for_tests
  kernels::set_host_for_tests(true);
  CS_CHECK(stem_conv_padded(x) && stem_conv_channels(x) == 4);
  CS_CHECK(!stem_conv_padded(torch::randn({2, 3, 8, 8})));               // NCHW
  CS_CHECK(!stem_conv_padded(torch::randn({2, 4, 8, 8}).contiguous(cl)));  // a row already
  CS_CHECK(stem_conv_channels(torch::randn({2, 4, 8, 8}).contiguous(cl)) == 4);
  CS_CHECK(stem_conv_padded(x.to(torch::kBFloat16)) && stem_conv_channels(x.to(torch::kBFloat16)) == 8);
  compat::set_autocast(torch::kCPU, true, torch::kBFloat16);
  const int64_t under_autocast = stem_conv_channels(x);
  compat::set_autocast(torch::kCPU, false, torch::kBFloat16);
  CS_CHECK(under_autocast == 8);
  kernels::set_for_tests("-stem");
  CS_CHECK(!stem_conv_padded(x));
  kernels::set_host_for_tests(false);
  kernels::set_for_tests("");
  return 0;
}

}  // namespace

int stem_conv_tests() {
  if (int rc = check_when()) return rc;
  // The padded path on the CPU (host mode): fp32, and bf16 under CPU autocast.
  kernels::set_host_for_tests(true);
  for (const Case& c : {Case{2, 8, 20, 7, 2, 3, torch::kFloat32}, Case{3, 16, 15, 3, 1, 1, torch::kFloat32},
                        Case{2, 8, 20, 7, 2, 3, torch::kBFloat16}}) {
    if (int rc = check(c, torch::kCPU)) {
      kernels::set_host_for_tests(false);
      return rc;
    }
  }
  kernels::set_host_for_tests(false);
  std::cout << "  stem_conv padded path cpu ok\n";
  if (!torch::cuda::is_available() || !kernels::compiled()) {
    std::cout << "  stem_conv: no CUDA kernels here (the portable path is torch::conv2d)\n";
    return 0;
  }
  const torch::Device dev(torch::kCUDA, 0);
  // ResNet-50's stem at micro-batch 256, 224 pixels, and a small one.
  for (const Case& c : {Case{256, 64, 224, 7, 2, 3, torch::kBFloat16}, Case{256, 64, 224, 7, 2, 3, torch::kHalf},
                        Case{4, 8, 32, 7, 2, 3, torch::kBFloat16}, Case{4, 8, 32, 7, 2, 3, torch::kFloat32}})
    if (int rc = check(c, dev)) return rc;
  std::cout << "  stem_conv padded path cuda ok\n";
  return 0;
}
