// bn_relu_test.cpp: batch_norm_act (src/bn_relu.h) against a float64
// reference (training-mode batch_norm, the residual add and ReLU in float64 on
// the same inputs), forward and backward, with the running statistics and
// num_batches_tracked, bf16 and fp16, with and without residual and ReLU,
// channel counts from 8 to 2048 (uneven splits of a block's threads) and on
// CUDA the real ResNet-50 shapes at micro-batches 256 and 384, and odd row
// counts (each thread's last batch of rows partial). On CUDA the "bn" kernels'
// errors must stay within twice those of the portable path (libtorch's
// BatchNorm2d in the activations' dtype, then add_ and relu_) on the same
// inputs, the measured floor, plus fp32's rounding level of a sum over the
// batch.
#include <torch/torch.h>

#include <cmath>
#include <iostream>
#include <string>
#include <tuple>
#include <vector>

#include "bn_relu.h"
#include "kernels.h"
#include "native_test.h"

using namespace cs;

namespace {

struct Out {
  torch::Tensor y, dx, dw, db, dres, rmean, rvar, batches;
};

struct Case {
  int64_t N, C, H, W;
  at::ScalarType t;
  bool residual, relu;
};

std::string name(const Case& c) {
  return std::to_string(c.N) + "x" + std::to_string(c.C) + "x" + std::to_string(c.H) + "x" +
         std::to_string(c.W) + " " + c10::toString(c.t) + (c.residual ? " +residual" : "") +
         (c.relu ? " relu" : "");
}

// One training step's forward and backward (upstream gradient gy) through
// batch_norm_act, or through the float64 reference (ref).
Out run(bool ref, const Case& c, const torch::Tensor& x0, const torch::Tensor& r0,
        const torch::Tensor& w0, const torch::Tensor& b0, const torch::Tensor& gy) {
  const auto dev = x0.device();
  torch::nn::BatchNorm2d bn(c.C);
  bn->to(dev);
  bn->train();
  {
    torch::NoGradGuard ng;
    bn->weight.copy_(w0);
    bn->bias.copy_(b0);
    bn->running_mean.fill_(0.5);
    bn->running_var.fill_(2.0);
  }
  const auto f64 = torch::kFloat64;
  auto x = (ref ? x0.to(f64) : x0.clone(at::MemoryFormat::ChannelsLast)).requires_grad_(true);
  auto r = c.residual ? (ref ? r0.to(f64) : r0.clone(at::MemoryFormat::ChannelsLast)).requires_grad_(true)
                      : torch::Tensor();
  Out o;
  torch::Tensor y;
  if (ref) {
    auto w = bn->weight.to(f64).detach().requires_grad_(true);
    auto b = bn->bias.to(f64).detach().requires_grad_(true);
    auto rm = bn->running_mean.to(f64), rv = bn->running_var.to(f64);
    y = torch::batch_norm(x, w, b, rm, rv, /*training=*/true, 0.1, 1e-5, false);
    if (c.residual) y = y + r;
    if (c.relu) y = torch::relu(y);
    y.backward(gy.to(f64));
    o.dw = w.grad();
    o.db = b.grad();
    o.rmean = rm;
    o.rvar = rv;
    o.batches = torch::ones({}, torch::kLong);
  } else {
    y = batch_norm_act(*bn, x, r, c.relu);
    TORCH_CHECK(y.scalar_type() == c.t && y.is_contiguous(at::MemoryFormat::ChannelsLast),
                "batch_norm_act: output dtype or layout");
    y.backward(gy);
    o.dw = bn->weight.grad();
    o.db = bn->bias.grad();
    o.rmean = bn->running_mean.clone();
    o.rvar = bn->running_var.clone();
    o.batches = bn->num_batches_tracked.clone();
  }
  o.y = y.detach();
  o.dx = x.grad();
  if (c.residual) o.dres = r.grad();
  return o;
}

int check_case(const Case& c, torch::Device dev, bool kernel) {
  torch::manual_seed(uint64_t(c.N * 1009 + c.C * 31 + c.H));
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(dev);
  const auto cl = at::MemoryFormat::ChannelsLast;
  // Per-channel offsets and spreads, as convolution outputs have.
  auto x = (torch::randn({c.N, c.C, c.H, c.W}, f32) * (1 + torch::rand({1, c.C, 1, 1}, f32) * 3) +
            torch::randn({1, c.C, 1, 1}, f32))
               .to(c.t)
               .contiguous(cl);
  auto r = c.residual ? torch::randn({c.N, c.C, c.H, c.W}, f32).to(c.t).contiguous(cl) : torch::Tensor();
  auto w = 1 + 0.2 * torch::randn({c.C}, f32), b = 0.2 * torch::randn({c.C}, f32);
  auto gy = torch::randn({c.N, c.C, c.H, c.W}, f32).to(c.t).contiguous(cl);

  auto ref = run(true, c, x, r, w, b, gy);
  kernels::set_for_tests("native");
  auto portable = run(false, c, x, r, w, b, gy);
  if (!kernel) {
    const double u = c.t == torch::kBFloat16 ? 1.0 / 256 : 1.0 / 2048;
    CS_CHECK(rel_err(portable.y, ref.y) < 2 * u);
    CS_CHECK(rel_err(portable.dx, ref.dx) < 8 * u);
    CS_CHECK(rel_err(portable.rvar, ref.rvar) < 1e-3);
    return 0;
  }
  kernels::set_for_tests("bn");
  {
    torch::nn::BatchNorm2d probe(c.C);
    probe->to(dev);
    CS_CHECK(batch_norm_act_fused(*probe, x, r));
    CS_CHECK(!batch_norm_act_fused(*probe, x.contiguous(), r));  // NCHW: the portable path
    probe->eval();
    CS_CHECK(!batch_norm_act_fused(*probe, x, r));  // eval mode: the portable path
  }
  auto got = run(false, c, x, r, w, b, gy);
  auto again = run(false, c, x, r, w, b, gy);
  kernels::set_for_tests("");
  CS_CHECK(got.batches.item<int64_t>() == 1);
  struct Cmp {
    const char* what;
    torch::Tensor got, portable, ref;
  };
  std::vector<Cmp> cmps{{"y", got.y, portable.y, ref.y},
                        {"dx", got.dx, portable.dx, ref.dx},
                        {"dw", got.dw, portable.dw, ref.dw},
                        {"db", got.db, portable.db, ref.db},
                        {"running_mean", got.rmean, portable.rmean, ref.rmean},
                        {"running_var", got.rvar, portable.rvar, ref.rvar}};
  if (c.residual) cmps.push_back({"dresidual", got.dres, portable.dres, ref.dres});
  for (const auto& m : cmps) {
    CS_CHECK(m.got.defined() && m.portable.defined());
    CS_CHECK(m.got.sizes() == m.ref.sizes() && m.got.scalar_type() == m.portable.scalar_type());
    const double e = rel_err(m.got, m.ref), floor = rel_err(m.portable, m.ref);
    // Plus fp32's rounding of a sum of M terms (sqrt(M) 2^-24): the level at
    // which two orders of summation differ, whichever is nearer the truth.
    if (!(e <= 2 * floor + std::sqrt(double(c.N * c.H * c.W)) * std::ldexp(1.0, -24))) {
      std::cerr << "FAIL batch_norm_act " << name(c) << ": " << m.what << " error " << e
                << " > 2 x the portable path's " << floor << "\n";
      return 1;
    }
  }
  CS_CHECK(torch::equal(got.y, again.y) && torch::equal(got.dx, again.dx) &&
           torch::equal(got.dw, again.dw) && torch::equal(got.rvar, again.rvar));
  return 0;
}

// batch_norm_act_twin with the kernels: the output twice from one node, its
// two gradients (g2 undefined: the twin unused) added by the backward kernel,
// bit for bit as batch_norm_act's output used twice (autograd adding them
// first, rounded to the activations' dtype).
int check_twin(const Case& c, torch::Device dev, bool use_twin) {
  torch::manual_seed(uint64_t(c.N * 7 + c.C));
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(dev);
  const auto cl = at::MemoryFormat::ChannelsLast;
  auto x0 = torch::randn({c.N, c.C, c.H, c.W}, f32).to(c.t).contiguous(cl);
  auto r0 = c.residual ? torch::randn({c.N, c.C, c.H, c.W}, f32).to(c.t).contiguous(cl)
                       : torch::Tensor();
  auto g1 = torch::randn({c.N, c.C, c.H, c.W}, f32).to(c.t).contiguous(cl);
  auto g2 = torch::randn({c.N, c.C, c.H, c.W}, f32).to(c.t).contiguous(cl);
  struct Grads {
    torch::Tensor y, dx, dres, dw, db;
  };
  auto step = [&](bool twin) {
    torch::nn::BatchNorm2d bn(c.C);
    bn->to(dev);
    bn->train();
    auto x = x0.clone(cl).requires_grad_(true);
    auto r = c.residual ? r0.clone(cl).requires_grad_(true) : torch::Tensor();
    torch::Tensor y, y2;
    if (twin) {
      std::tie(y, y2) = batch_norm_act_twin(*bn, x, r, c.relu);
      TORCH_CHECK(y.grad_fn() && y2.grad_fn() == y.grad_fn(), "twin: one node");
      TORCH_CHECK(torch::equal(y, y2), "twin: the same values");
    } else {
      y = batch_norm_act(*bn, x, r, c.relu);
      y2 = y;
    }
    std::vector<torch::Tensor> outs{y}, grads{g1};
    if (use_twin) {
      outs.push_back(y2);
      grads.push_back(g2);
    }
    torch::autograd::backward(outs, grads);
    return Grads{y.detach(), x.grad(), c.residual ? r.grad() : torch::Tensor(), bn->weight.grad(),
                 bn->bias.grad()};
  };
  kernels::set_for_tests("bn,res");
  auto once = step(false), twice = step(true);
  CS_CHECK(torch::equal(once.y, twice.y) && torch::equal(once.dx, twice.dx));
  CS_CHECK(torch::equal(once.dw, twice.dw) && torch::equal(once.db, twice.db));
  CS_CHECK(!c.residual || torch::equal(once.dres, twice.dres));
  // "res" switched off: the kernel's output, once, as both twins.
  kernels::set_for_tests("bn");
  torch::nn::BatchNorm2d bn(c.C);
  bn->to(dev);
  bn->train();
  auto one = batch_norm_act_twin(*bn, x0, r0, c.relu);
  kernels::set_for_tests("");
  CS_CHECK(one.first.is_same(one.second) && torch::equal(one.first, once.y));
  return 0;
}

}  // namespace

int bn_relu_tests() {
  const auto B = torch::kBFloat16, H = torch::kHalf;
  std::vector<Case> cases = {
      {4, 64, 8, 8, B, false, true},    {4, 64, 8, 8, B, true, true},
      {3, 8, 5, 7, B, false, true},     {5, 24, 3, 3, B, true, false},  // 3 lanes a row: 85 rows at once
      {2, 384, 4, 4, B, false, false},  {2, 2048, 7, 7, B, true, true},
      {4, 64, 8, 8, H, true, true},     {2, 256, 6, 6, H, false, true},
  };
  auto check = [](const Case& c, torch::Device dev, bool kernel) {
    return run_case("batch_norm_act", name(c) + " (" + dev.str() + ")", [&] { return check_case(c, dev, kernel); });
  };
  for (const auto& c : cases) {
    if (c.t == H) continue;  // no fp16 batch norm on libtorch 1.13's CPU
    if (int rc = check(c, torch::kCPU, false)) return rc;
  }
  std::cout << "  batch_norm_act portable cpu ok\n";
  // The bn kernels' host version through the same autograd function as on the
  // GPU (its arguments, saved tensors and gradients), with and without a residual.
  {
    HostKernels host;
    for (const auto& c : cases) {
      if (c.t == H) continue;
      if (int rc = check(c, torch::kCPU, true)) return rc;
    }
  }
  std::cout << "  batch_norm_act bn kernels' host version cpu ok\n";
  // The output twice (a ResNet block's): both gradients used, or only the first.
  auto twins = [](const std::vector<Case>& cs, torch::Device dev) {
    for (const auto& c : cs)
      for (bool use : {true, false})
        if (int rc = run_case("batch_norm_act twin", name(c) + (use ? "" : " (twin unused)"),
                              [&] { return check_twin(c, dev, use); }))
          return rc;
    return 0;
  };
  {
    HostKernels host;
    std::vector<Case> cpu;
    for (const auto& c : cases)
      if (c.t != H) cpu.push_back(c);
    if (int rc = twins(cpu, torch::kCPU)) return rc;
  }
  std::cout << "  batch_norm_act twin outputs (host version) cpu ok\n";
  kernels::set_for_tests("");
  if (!torch::cuda::is_available()) return 0;
  if (!kernels::compiled()) {
    std::cout << "  batch_norm_act: no CUDA kernels in this build\n";
    return 0;
  }
  // ResNet-50 at micro-batch 256, 224 pixels: the stem, a stage-1 block's
  // output with its residual, the last stage.
  cases.push_back({256, 64, 112, 112, B, false, true});
  cases.push_back({256, 256, 56, 56, B, true, true});
  cases.push_back({256, 2048, 7, 7, B, true, true});
  cases.push_back({256, 256, 56, 56, H, true, true});
  // At micro-batch 384 (issue 41): the last stage's widths, its downsample
  // (no ReLU, no residual) and a stage-3 block's output in fp16.
  cases.push_back({384, 2048, 7, 7, B, true, true});
  cases.push_back({384, 512, 7, 7, B, false, true});
  cases.push_back({384, 2048, 7, 7, B, false, false});
  cases.push_back({384, 1024, 14, 14, H, true, true});
  // Rows a thread reads in batches of 2 or 4 (bn_relu.cu, kStatsRows,
  // kBwdRows): odd row counts leave each thread a partial last batch, a
  // block's rows not a multiple of its threads' rows (7 x 47 x 47 = 15,463
  // rows of 40 channels: 51 rows at once; 33 x 43 x 41 rows of 24: 85).
  cases.push_back({7, 40, 47, 47, B, true, true});
  cases.push_back({33, 24, 43, 41, B, false, true});
  cases.push_back({33, 24, 43, 41, H, true, false});
  const torch::Device dev(torch::kCUDA, 0);
  for (const auto& c : cases)
    if (int rc = check(c, dev, true)) return rc;
  std::cout << "  batch_norm_act bn kernels cuda ok (" << cases.size() << " cases)\n";
  if (int rc = twins(cases, dev)) return rc;
  std::cout << "  batch_norm_act twin outputs cuda ok\n";
  return 0;
}
