// optim_test.cpp: unit tests of the optimizer, clipping and loss-scaling code
// paths that the CPU build of libtorch 1.13 cannot reach through the engine
// (fp16 skips, device-side scaler). AdamW is checked against torch::optim::AdamW.
// Run by tests/main.cpp (make engine-tests).
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>
#include <iostream>
#include <limits>
#include "native_test.h"
#include "optim.h"
#include "precision.h"
using namespace cs;
namespace {

// The clip coefficient folded into the optimizer (Optimizer::step with
// grad_coef, as the trainer runs a fused optimizer) against clipping first and
// stepping after: the same updates and the same gradients after the step. On
// the CPU both go through the foreach path (the plumbing: the coefficient
// clip_grads returns is the one it applies); on CUDA the fused AdamW and SGD
// divide by grad_scale = 1 / coef as they read each gradient, a different
// rounding of the same product: updates agree within 1e-5 relative (float32
// rounding of g * c against g / (1 / c) is ~1e-7 of each gradient).
int clip_fold_case(torch::Device dev, OptimizerKind kind, double grad_mult, bool scaled,
                   bool skip) {
  auto gen = at::detail::createCPUGenerator(29);
  std::vector<torch::Tensor> a, b, grads;
  for (int64_t n : {4096, 37, 768, 3}) {
    auto p = torch::randn({n}, gen).to(dev);
    grads.push_back((torch::randn({n}, gen) * grad_mult).to(dev));
    a.push_back(p.clone().requires_grad_(true));
    b.push_back(p.clone().requires_grad_(true));
  }
  const double lr = kind == OptimizerKind::AdamW ? 1e-2 : 0.1;
  Optimizer oa({a[0], a[1]}, {a[2], a[3]}, default_optim(kind, lr));
  Optimizer ob({b[0], b[1]}, {b[2], b[3]}, default_optim(kind, lr));
  CS_CHECK(!oa.folds_grad_coef() || dev.is_cuda());  // the CPU path is unchanged
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(dev);
  // fp16's loss scale 1024: the gradients arrive scaled by it.
  auto inv = scaled ? torch::full({}, 1.0 / 1024, f32) : torch::Tensor();
  std::vector<torch::Tensor> before;
  for (int step = 0; step < 3; step++) {
    before.clear();
    for (size_t i = 0; i < a.size(); i++) {
      auto g = grads[i] * (scaled ? 1024.0 : 1.0) * double(step + 1);
      if (skip && step == 2 && i == 1) g[0] = std::numeric_limits<float>::infinity();
      a[i].mutable_grad() = g.clone();
      b[i].mutable_grad() = g.clone();
      before.push_back(a[i].detach().clone());
    }
    auto ca = unscale_and_clip(a, inv, 1.0, /*apply=*/true);
    oa.step(scaled ? ca.found_inf : torch::Tensor());
    auto cb = unscale_and_clip(b, inv, 1.0, /*apply=*/false);
    ob.step(scaled ? cb.found_inf : torch::Tensor(), cb.coef);
    CS_CHECK(torch::equal(ca.norm, cb.norm) && torch::equal(ca.found_inf, cb.found_inf));
    const bool skipped = ca.found_inf.item<float>() != 0;
    CS_CHECK(skipped == (skip && step == 2));
    for (size_t i = 0; i < a.size(); i++) {
      auto ua = (a[i].detach() - before[i]).to(torch::kFloat64).cpu();
      auto ub = (b[i].detach() - before[i]).to(torch::kFloat64).cpu();
      if (skipped) {
        CS_CHECK(torch::equal(a[i].detach(), before[i]) && torch::equal(b[i].detach(), before[i]));
        continue;
      }
      const double rel = ((ua - ub).norm() / ua.norm().clamp_min(1e-30)).item<double>();
      if (!dev.is_cuda()) {
        CS_CHECK(rel == 0);
        CS_CHECK(torch::equal(a[i].grad(), b[i].grad()));
      } else {
        CS_CHECK(rel < 1e-5);
        CS_CHECK(torch::allclose(a[i].grad(), b[i].grad(), 1e-6, 1e-12));
      }
    }
  }
  return 0;
}

int clip_fold_tests(torch::Device dev) {
  for (auto kind : {OptimizerKind::AdamW, OptimizerKind::SGDMomentum})
    for (double mult : {0.001, 3.0})  // the norm below and above max_norm 1
      for (bool scaled : {false, true})
        for (bool skip : {false, true}) {
          if (skip && !scaled) continue;  // only fp16's found_inf skips a step
          if (clip_fold_case(dev, kind, mult, scaled, skip)) {
            std::cerr << "  clip fold case: " << dev << (kind == OptimizerKind::AdamW ? " adamw" : " sgd")
                      << " grads x" << mult << (scaled ? " loss-scaled" : "") << (skip ? " inf" : "")
                      << "\n";
            return 1;
          }
        }
  {
    // A gradient not laid out as its parameter (a channels_last weight, a
    // row-major gradient): the fused kernels would refuse it, so the step
    // takes the foreach path (and multiplies by the coefficient itself).
    auto o = torch::TensorOptions().device(dev);
    auto p = torch::randn({8, 8, 3, 3}, o).contiguous(at::MemoryFormat::ChannelsLast).requires_grad_(true);
    auto q = p.detach().clone();
    Optimizer opt({p}, {}, default_optim(OptimizerKind::SGDMomentum, 0.1));
    p.mutable_grad() = torch::ones({8, 8, 3, 3}, o);
    CS_CHECK(!opt.folds_grad_coef());
    opt.step(torch::Tensor(), torch::full({}, 0.5, o.dtype(torch::kFloat64)));
    // g = 0.5 + 1e-4 q; buf = g; p = q - 0.1 g
    CS_CHECK(torch::allclose(p.detach(), q - 0.1 * (0.5 + 1e-4 * q), 1e-6, 1e-7));
  }
  Optimizer probe({torch::zeros({1}, torch::TensorOptions().device(dev)).requires_grad_(true)}, {},
                  default_optim(OptimizerKind::AdamW, 1e-3));
  std::cout << "clip folded into the optimizer ok (" << dev << ", " << probe.implementation()
            << (probe.folds_grad_coef() ? ", folded in the fused kernel" : ", multiplied first")
            << ")\n";
  return 0;
}

}  // namespace

int optim_tests() {  // 1 on the first failed check
  torch::Device cpu(torch::kCPU);
  // Loss scaler
  LossScaler s(cpu);
  auto zero = torch::zeros({}), one = torch::ones({});
  for (int i = 0; i < 1999; i++) s.update(zero);
  CS_CHECK(s.scale().item<float>() == 65536.f);
  s.update(zero);
  CS_CHECK(s.scale().item<float>() == 131072.f);
  for (int i = 0; i < 1000; i++) s.update(zero);
  s.update(one);
  CS_CHECK(s.scale().item<float>() == 65536.f);
  for (int i = 0; i < 1999; i++) s.update(zero);
  CS_CHECK(s.scale().item<float>() == 65536.f);
  s.update(zero);
  CS_CHECK(s.scale().item<float>() == 131072.f);
  std::cout << "scaler ok\n";
  // clip
  auto p = torch::zeros({3}).requires_grad_(true);
  p.mutable_grad() = torch::tensor({3.f, 4.f, 0.f});
  auto r = unscale_and_clip({p}, torch::Tensor(), 1.0);
  CS_CHECK(std::abs(r.norm.item<float>() - 5.f) < 1e-5);
  CS_CHECK(r.found_inf.item<float>() == 0);
  CS_CHECK(std::abs(p.grad().norm().item<float>() - 1.f) < 1e-4);
  p.mutable_grad() = torch::tensor({300.f, 400.f, 0.f});
  r = unscale_and_clip({p}, torch::full({}, 0.01f), 10.0);
  CS_CHECK(std::abs(r.norm.item<float>() - 5.f) < 1e-4);
  CS_CHECK(std::abs(p.grad()[0].item<float>() - 3.f) < 1e-4);
  p.mutable_grad() = torch::tensor({INFINITY, 4.f, 0.f});
  r = unscale_and_clip({p}, torch::full({}, 0.5f), 1.0);
  CS_CHECK(r.found_inf.item<float>() == 1);
  p.mutable_grad() = torch::tensor({NAN, 4.f, 0.f});
  r = unscale_and_clip({p}, torch::Tensor(), 1.0);
  CS_CHECK(r.found_inf.item<float>() == 1);
  // clip in parts (a pipeline's stages): the float64 sum of the parts' sums of
  // squares, added in any order, clips every gradient to the same bits as one
  // rank clipping them all.
  {
    auto gen = at::detail::createCPUGenerator(11);
    std::vector<torch::Tensor> whole, copy;
    for (int64_t n : {1000, 37, 4096, 3, 777, 50000}) {
      auto q = torch::zeros({n}).requires_grad_(true);
      q.mutable_grad() = torch::randn({n}, gen) * 3.0;
      whole.push_back(q);
      copy.push_back(q.grad().clone());
    }
    const auto one = unscale_and_clip(whole, torch::full({}, 0.5f), 1.0);
    std::vector<torch::Tensor> a{copy[0], copy[1], copy[2]}, b{copy[3], copy[4], copy[5]};
    auto sumsq = grad_sumsq(b, cpu) + grad_sumsq(a, cpu);  // the other order
    CS_CHECK(sumsq.scalar_type() == torch::kFloat64);
    const auto pa = clip_grads(a, sumsq, torch::full({}, 0.5f), 1.0);
    const auto pb = clip_grads(b, sumsq, torch::full({}, 0.5f), 1.0);
    CS_CHECK(torch::equal(pa.norm, one.norm) && torch::equal(pb.norm, one.norm));
    for (size_t i = 0; i < whole.size(); i++) CS_CHECK(torch::equal(whole[i].grad(), copy[i]));
    CS_CHECK(grad_sumsq({}, cpu).item<double>() == 0);
  }
  std::cout << "clip ok\n";
  // SGD: step, then skipped step leaves everything unchanged
  {
    auto w = torch::ones({2}).requires_grad_(true);
    auto b = torch::ones({2}).requires_grad_(true);
    OptimOptions o = default_optim(OptimizerKind::SGDMomentum, 0.1);
    Optimizer opt({w}, {b}, o);
    w.mutable_grad() = torch::full({2}, 2.f); b.mutable_grad() = torch::full({2}, 2.f);
    opt.step(zero);
    // w: g = 2 + 1e-4*1; buf = g; w = 1 - 0.1*g
    CS_CHECK(std::abs(w[0].item<float>() - (1 - 0.1 * (2 + 1e-4))) < 1e-6);
    CS_CHECK(std::abs(b[0].item<float>() - (1 - 0.2)) < 1e-6);
    auto w1 = w.detach().clone(), b1 = b.detach().clone();
    w.mutable_grad() = torch::full({2}, NAN); b.mutable_grad() = torch::full({2}, INFINITY);
    opt.step(one);
    CS_CHECK(torch::equal(w.detach(), w1)); CS_CHECK(torch::equal(b.detach(), b1));
    w.mutable_grad() = torch::full({2}, 1.f); b.mutable_grad() = torch::full({2}, 1.f);
    opt.step(zero);
    // b: buf = 0.9*2 + 1 = 2.8; b = 0.8 - 0.28
    CS_CHECK(std::abs(b[0].item<float>() - (0.8 - 0.28)) < 1e-6);
    // same without found_inf (non-fp16 path)
    auto w2 = torch::ones({2}).requires_grad_(true);
    Optimizer opt2({}, {w2}, o);
    w2.mutable_grad() = torch::full({2}, 2.f); opt2.step(torch::Tensor());
    w2.mutable_grad() = torch::full({2}, 1.f); opt2.step(torch::Tensor());
    CS_CHECK(std::abs(w2[0].item<float>() - (0.8 - 0.28)) < 1e-6);
    std::cout << "sgd ok\n";
  }
  // AdamW foreach vs torch::optim::AdamW
  {
    auto w = torch::randn({4, 3}).requires_grad_(true);
    auto w_ref = w.detach().clone().requires_grad_(true);
    OptimOptions o = default_optim(OptimizerKind::AdamW, 1e-2);
    Optimizer opt({w}, {}, o);
    torch::optim::AdamW ref({w_ref}, torch::optim::AdamWOptions(1e-2).betas({0.9, 0.95}).eps(1e-8).weight_decay(0.1));
    for (int i = 0; i < 5; i++) {
      auto g = torch::randn({4, 3});
      w.mutable_grad() = g.clone(); w_ref.mutable_grad() = g.clone();
      opt.step(torch::Tensor()); ref.step();
    }
    CS_CHECK(torch::allclose(w.detach(), w_ref.detach(), 1e-5, 1e-6));
    auto before = w.detach().clone();
    w.mutable_grad() = torch::randn({4, 3});
    opt.step(one);
    CS_CHECK(torch::equal(before, w.detach()));
    std::cout << "adamw ok\n";
  }
  if (clip_fold_tests(cpu)) return 1;
  if (torch::cuda::is_available() && clip_fold_tests(torch::Device(torch::kCUDA))) return 1;
  return 0;
}
