// optim_test.cpp: unit tests of the optimizer, clipping and loss-scaling code
// paths that the CPU build of libtorch 1.13 cannot reach through the engine
// (fp16 skips, device-side scaler). AdamW is checked against torch::optim::AdamW.
// Run by tests/main.cpp (make engine-tests).
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>
#include <iostream>
#include "native_test.h"
#include "optim.h"
#include "precision.h"
using namespace cs;
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
  return 0;
}
