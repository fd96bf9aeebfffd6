// linear_ce_test.cpp: linear_cross_entropy (src/linear_ce.h) against
// torch::linear + cross_entropy: the loss and the gradients (h, weight and,
// where there is one, bias as BERT's MLM decoder has), with and without
// vocabulary padding, in one chunk and in many, in fp32 exactly (to rounding)
// and under autocast within its precision; on CUDA also fp16 with a loss scale.
#include <torch/torch.h>

#include <iostream>
#include <string>

#include "compat.h"
#include "kernels.h"
#include "linear_ce.h"
#include "native_test.h"

using namespace cs;

namespace {

struct Result {
  torch::Tensor loss, gh, gw, gb;
};

// One forward and backward of fused or plain, with the loss multiplied by
// scale first (as grad accumulation and loss scaling do). Under autocast when
// dtype is not fp32.
// b0 undefined: no bias.
Result run(bool fused, const torch::Tensor& h0, const torch::Tensor& w0, const torch::Tensor& b0,
           const torch::Tensor& t, at::ScalarType dtype, int64_t chunk, double scale) {
  auto h = h0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true);
  torch::Tensor b;
  if (b0.defined()) b = b0.clone().requires_grad_(true);
  const auto dev = h.device().type();
  const bool cast = dtype != torch::kFloat32;
  if (cast) compat::set_autocast(dev, true, dtype);
  torch::Tensor loss;
  if (fused) {
    loss = linear_cross_entropy(h, w, t, chunk, b);
  } else {
    auto logits = torch::linear(h, w, b).to(torch::kFloat32);
    loss = torch::nn::functional::cross_entropy(logits, t);
  }
  if (cast) {
    compat::set_autocast(dev, false, dtype);
    at::autocast::clear_cache();
  }
  (loss * scale).backward();
  return {loss.detach(), h.grad(), w.grad(), b.defined() ? b.grad() : torch::Tensor()};
}

struct Shape {
  int64_t N, V, d;
};

int check_device(torch::Device dev, const std::vector<Shape>& shapes) {
  torch::manual_seed(7);
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(dev);
  for (const auto& sh : shapes) {
    for (bool with_bias : {false, true}) {
      const int64_t N = sh.N, V = sh.V, d = sh.d;
      // Logits of standard deviation about 2 whatever the width.
      auto h = torch::randn({N, d}, f32);
      auto w = torch::randn({V, d}, f32) * (0.5 * std::sqrt(16.0 / d));
      auto t = torch::randint(0, V, {N}, f32.dtype(torch::kLong));
      torch::Tensor b;
      if (with_bias) b = torch::randn({V}, f32);
      auto ref = run(false, h, w, b, t, torch::kFloat32, 0, 3.0);
      for (int64_t chunk : {0, 5}) {
        auto got = run(true, h, w, b, t, torch::kFloat32, chunk, 3.0);
        CS_CHECK(got.gw.sizes() == w.sizes());
        CS_CHECK(got.gb.defined() == with_bias);
        if (with_bias) CS_CHECK(got.gb.sizes() == b.sizes() && rel_err(got.gb, ref.gb) < 1e-5);
        CS_CHECK(got.loss.scalar_type() == torch::kFloat32);
        CS_CHECK(std::abs(got.loss.item<double>() - ref.loss.item<double>()) <
              1e-5 * ref.loss.item<double>());
        CS_CHECK(rel_err(got.gh, ref.gh) < 1e-5);
        CS_CHECK(rel_err(got.gw, ref.gw) < 1e-5);
      }
      std::vector<at::ScalarType> low{torch::kBFloat16};
      if (dev.is_cuda()) low.push_back(torch::kHalf);
      for (auto dt : low) {
        // fp16's backward multiplies the logits' gradient by the incoming
        // scale before the matmuls: a loss scale of 1024 must come out 1024x.
        const double scale = dt == torch::kHalf ? 1024.0 : 3.0;
        auto plain = run(false, h, w, b, t, dt, 0, scale);
        auto got = run(true, h, w, b, t, dt, 5, scale);
        CS_CHECK(got.gh.scalar_type() == torch::kFloat32 && got.gw.scalar_type() == torch::kFloat32);
        CS_CHECK(std::abs(got.loss.item<double>() - ref.loss.item<double>()) <
              2e-2 * ref.loss.item<double>());
        // The products ran in dt, not fp32 (autocast reads as off where its
        // dispatch keys are excluded, as inside the forward's guards).
        CS_CHECK(rel_err(got.gh, ref.gh * (scale / 3.0)) > 1e-4);
        // Against the fp32 result, as loose as the plain autocast head is.
        const double tol = 4 * std::max(rel_err(plain.gh, ref.gh * (scale / 3.0)), 5e-3);
        CS_CHECK(rel_err(got.gh, ref.gh * (scale / 3.0)) < tol);
        CS_CHECK(rel_err(got.gw, ref.gw * (scale / 3.0)) <
                 4 * std::max(rel_err(plain.gw, ref.gw * (scale / 3.0)), 5e-3));
        if (with_bias) {
          CS_CHECK(got.gb.scalar_type() == torch::kFloat32);
          CS_CHECK(rel_err(got.gb, ref.gb * (scale / 3.0)) <
                   4 * std::max(rel_err(plain.gb, ref.gb * (scale / 3.0)), 5e-3));
        }
      }
    }
  }
  return 0;
}

}  // namespace

int linear_ce_tests() {
  // Padded to 256; already a multiple of 64; above 1024 (CUDA's softmax takes
  // another kernel there).
  const std::vector<Shape> small{{37, 203, 16}, {37, 128, 16}, {37, 3001, 16}};
  if (int rc = check_device(torch::kCPU, small)) return rc;
  std::cout << "  linear_ce cpu ok\n";
  // The ce kernel's host version inside the same autograd function as on the GPU.
  int host_rc = 0;
  {
    HostKernels host;
    kernels::set_for_tests("ce");
    host_rc = check_device(torch::kCPU, small);
    kernels::set_for_tests("");
  }
  if (host_rc) return host_rc;
  std::cout << "  linear_ce ce kernel's host version cpu ok\n";
  if (torch::cuda::is_available()) {
    const torch::Device cuda(torch::kCUDA, 0);
    kernels::set_for_tests("native");
    if (int rc = check_device(cuda, small)) return rc;
    std::cout << "  linear_ce cuda (chunked) ok\n";
    if (kernels::compiled()) {
      kernels::set_for_tests("ce");
      // GPT-2's vocabulary (padded to 50,304) and width, 2,048 of the 16,384
      // rows, and BERT's (30,522, padded to 30,528), 2,464 rows (32 x 77
      // masked positions): the kernel with two rows in shared memory in bf16 and fp16, the
      // one with a block per row in fp32 (two rows: 402 KB); a vocabulary of
      // 60,000 takes the latter in every dtype.
      auto shapes = small;
      shapes.push_back({2048, 50257, 768});
      shapes.push_back({2464, 30522, 1024});
      shapes.push_back({64, 60000, 16});
      const int rc = check_device(cuda, shapes);
      kernels::set_for_tests("");
      if (rc) return rc;
      std::cout << "  linear_ce cuda (ce kernel) ok\n";
    }
  }
  return 0;
}
