// optim_test.cpp: unit tests of the optimizer, clipping and loss-scaling code
// paths that the CPU build of libtorch 1.13 cannot reach through the engine
// (fp16 skips, device-side scaler). AdamW is checked against torch::optim::AdamW.
// Run by tests/main.cpp (make engine-tests).
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>
#include <iostream>
#include <limits>
#include <memory>
#include "native_test.h"
#include "optim.h"
#include "precision.h"
using namespace cs;
namespace {

// The clip coefficient folded into the optimizer (Optimizer::step with
// grad_coef, as the trainer runs a fused optimizer) against clipping first and
// stepping after: the same updates and the same gradients after the step
// (except under the engine's AdamW kernel, which leaves them as given). On
// the CPU both go through the foreach path (the plumbing: the coefficient
// clip_grads returns is the one it applies); on CUDA the fused AdamW and SGD
// divide by grad_scale = 1 / coef as they read each gradient, a different
// rounding of the same product: updates agree within 1e-5 relative (float32
// rounding of g * c against g / (1 / c) is ~1e-7 of each gradient), so from
// the first clipped step on the two arms hold slightly different parameters
// and each is compared with its own copy from before the step.
//
// bad (fp16's loss-scaled steps only): step 2 gets an inf (1) or a nan (2) in
// one gradient. That step must change nothing, neither the parameters nor the
// optimizer's state (moments, momentum buffers, AdamW's step counter): each
// arm has a twin that never sees step 2, and after step 3 arm and twin must
// hold the same bits.
int clip_fold_case(torch::Device dev, OptimizerKind kind, double grad_mult, bool scaled, int bad) {
  constexpr int kSteps = 4, kBadStep = 2;
  auto gen = at::detail::createCPUGenerator(29);
  std::vector<torch::Tensor> init, grads;
  for (int64_t n : {4096, 37, 768, 3}) {
    init.push_back(torch::randn({n}, gen).to(dev));
    grads.push_back((torch::randn({n}, gen) * grad_mult).to(dev));
  }
  const double lr = kind == OptimizerKind::AdamW ? 1e-2 : 0.1;
  // One arm: parameters and their optimizer; fold: the coefficient goes to
  // Optimizer::step instead of being multiplied into the gradients.
  struct Arm {
    std::vector<torch::Tensor> p;
    std::unique_ptr<Optimizer> opt;
    bool fold;
  };
  auto arm = [&](bool fold) {
    Arm a;
    for (const auto& t : init) a.p.push_back(t.clone().requires_grad_(true));
    a.opt = std::make_unique<Optimizer>(std::vector<torch::Tensor>{a.p[0], a.p[1]},
                                        std::vector<torch::Tensor>{a.p[2], a.p[3]},
                                        default_optim(kind, lr));
    a.fold = fold;
    return a;
  };
  Arm a = arm(false), b = arm(true), ta = arm(false), tb = arm(true);  // ta, tb: the twins
  CS_CHECK(!b.opt->folds_grad_coef() || dev.is_cuda());  // the CPU path is unchanged
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(dev);
  // fp16's loss scale 1024: the gradients arrive scaled by it.
  auto inv = scaled ? torch::full({}, 1.0 / 1024, f32) : torch::Tensor();
  // One step of an arm on gradients g; returns found_inf.
  auto step = [&](Arm& x, const std::vector<torch::Tensor>& g) {
    for (size_t i = 0; i < x.p.size(); i++) x.p[i].mutable_grad() = g[i].clone();
    auto c = unscale_and_clip(x.p, inv, 1.0, /*apply=*/!x.fold);
    x.opt->step(scaled ? c.found_inf : torch::Tensor(), x.fold ? c.coef : torch::Tensor());
    return c;
  };
  auto snapshot = [](const Arm& x) {
    std::vector<torch::Tensor> s;
    for (const auto& t : x.p) s.push_back(t.detach().clone());
    return s;
  };
  for (int k = 0; k < kSteps; k++) {
    std::vector<torch::Tensor> g;
    for (size_t i = 0; i < grads.size(); i++) {
      g.push_back(grads[i] * (scaled ? 1024.0 : 1.0) * double(k + 1));
      if (bad && k == kBadStep && i == 1)
        g[i][0] = bad == 1 ? std::numeric_limits<float>::infinity()
                           : std::numeric_limits<float>::quiet_NaN();
    }
    const auto before_a = snapshot(a), before_b = snapshot(b);
    auto ca = step(a, g);
    auto cb = step(b, g);
    if (!(bad && k == kBadStep)) {
      step(ta, g);
      step(tb, g);
    }
    CS_CHECK(torch::equal(ca.found_inf, cb.found_inf));
    CS_CHECK(torch::equal(ca.norm, cb.norm) || (bad && k == kBadStep));  // nan != nan
    const bool skipped = ca.found_inf.item<float>() != 0;
    CS_CHECK(skipped == (bad && k == kBadStep));
    for (size_t i = 0; i < a.p.size(); i++) {
      if (skipped) {
        CS_CHECK(torch::equal(a.p[i].detach(), before_a[i]));
        CS_CHECK(torch::equal(b.p[i].detach(), before_b[i]));
        continue;
      }
      auto ua = (a.p[i].detach() - before_a[i]).to(torch::kFloat64).cpu();
      auto ub = (b.p[i].detach() - before_b[i]).to(torch::kFloat64).cpu();
      CS_CHECK(ua.abs().sum().item<double>() > 0);  // a step that changes nothing would pass below
      const double rel = ((ua - ub).norm() / ua.norm().clamp_min(1e-30)).item<double>();
      if (!dev.is_cuda()) {
        CS_CHECK(rel == 0);
        CS_CHECK(torch::equal(a.p[i].grad(), b.p[i].grad()));
      } else {
        // On CUDA the arms round the update differently; a new parameter is
        // p - update rounded to p's precision, so where the update is a few
        // ulps of p (grads x0.001) its relative error is large though the
        // parameters agree. Each element: within 2 ulps of the parameter or
        // 1e-5 of its own update (a missed or doubled clip coefficient is
        // far outside both).
        const double eps = a.p[i].scalar_type() == torch::kDouble ? std::numeric_limits<double>::epsilon()
                                                                   : std::numeric_limits<float>::epsilon();
        auto pa = a.p[i].detach().to(torch::kFloat64).cpu(), pb = b.p[i].detach().to(torch::kFloat64).cpu();
        auto bound = 2 * eps * torch::maximum(pa.abs(), pb.abs()) + 1e-5 * ua.abs();
        CS_CHECK(((pa - pb).abs() <= bound).all().item<bool>());
        CS_CHECK(rel < 1e-5 || ua.abs().max().item<double>() < 1e3 * eps * pa.abs().max().item<double>());
        if (b.opt->implementation() == "engine-adamw")
          CS_CHECK(torch::equal(b.p[i].grad(), g[i]));  // read, never written back
        else
          CS_CHECK(torch::allclose(a.p[i].grad(), b.p[i].grad(), 1e-6, 1e-12));
      }
    }
  }
  // The skipped step left no trace: each arm equals its twin bit for bit.
  for (size_t i = 0; i < a.p.size(); i++) {
    CS_CHECK(torch::equal(a.p[i].detach(), ta.p[i].detach()));
    CS_CHECK(torch::equal(b.p[i].detach(), tb.p[i].detach()));
  }
  return 0;
}

int clip_fold_tests(torch::Device dev) {
  for (auto kind : {OptimizerKind::AdamW, OptimizerKind::SGDMomentum})
    for (double mult : {0.001, 3.0})  // the norm below and above max_norm 1
      for (bool scaled : {false, true})
        for (int bad : {0, 1, 2}) {
          if (bad && !scaled) continue;  // only fp16's found_inf skips a step
          if (clip_fold_case(dev, kind, mult, scaled, bad)) {
            std::cerr << "  clip fold case: " << dev << (kind == OptimizerKind::AdamW ? " adamw" : " sgd")
                      << " grads x" << mult << (scaled ? " loss-scaled" : "")
                      << (bad == 1 ? " inf" : bad == 2 ? " nan" : "") << "\n";
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
