// adamw_test.cpp: the engine's AdamW kernel (kernels.h "adam", cuda/adamw.cu)
// and Optimizer's path to it (optim.h), over 70 fp32 tensors (more than one
// launch's 64) in two groups of different weight decay: sizes that are not
// multiples of 4, that cross the kernel's blocks (8,192 elements) and none (an
// empty tensor), a channels_last parameter; steps with and without a folded
// gradient coefficient (the kernel's grad_scale) and one that found_inf = 1
// skips, which must leave no trace: a twin that never saw it holds the same
// bits afterwards (parameters, moments and the step counter all feed later
// steps).
//   CPU: the kernel's host version through Optimizer against its foreach
//   AdamW path, to a few float32 ulps (each path rounds its own way, below).
//   CUDA: the kernel against at::_fused_adamw_ on the same inputs, parameters
//   and both moments equal bit for bit, some tensors misaligned (the kernel's
//   one-float-at-a-time path); repeatable; the same launch captured in a CUDA
//   graph; Optimizer's engine path against its PyTorch-fused path, bit for bit.
// The gradients are only read by the kernel: they must come out as they went in.
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <iostream>
#include <limits>
#include <memory>

#include "compat.h"
#include "kernels.h"
#include "kernels_glue.h"
#include "native_test.h"
#include "optim.h"

#ifdef CS_WITH_KERNELS
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#endif

using namespace cs;

namespace {

constexpr double kLr = 1e-2;
constexpr int kSteps = 5, kSkipped = 2;  // the step found_inf = 1 skips

// The largest distance between a and b (float32, one shape) in ulps: the bit
// patterns as points of one ordered line (-0 and +0 both at 0).
int64_t max_ulps(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.numel() == 0) return 0;
  auto line = [](const torch::Tensor& t) {
    auto i = t.detach().contiguous().cpu().view(torch::kInt32).to(torch::kInt64);
    return torch::where(i < 0, -(i.bitwise_and(0x7fffffff)), i);
  };
  return (line(a) - line(b)).abs().max().item<int64_t>();
}

// Sizes of the tensors: small, odd, around the kernel's passes (2,048
// elements) and blocks (8,192), one empty; the rest random.
std::vector<int64_t> sizes() {
  std::vector<int64_t> n = {0, 1, 3, 4, 5, 1023, 2047, 2048, 2049, 8191, 8192, 8193, 16389, 100003};
  auto gen = at::detail::createCPUGenerator(5);
  while (n.size() < 70) n.push_back(1 + torch::randint(5000, {1}, gen).item<int64_t>());
  return n;
}

// A new tensor of t's sizes and layout holding values, starting one float into
// its storage where t does (or where misalign says so, t being 1-D).
torch::Tensor alike(const torch::Tensor& t, const torch::Tensor& values, bool misalign = false) {
  if (misalign || t.storage_offset() == 1)
    return torch::empty({t.numel() + 1}, t.options()).narrow(0, 1, t.numel()).view(t.sizes()).copy_(values);
  return torch::empty_like(t).copy_(values);
}

// One model's parameters: tensor i holds sizes()[i] values (i % 3 == 2: no
// weight decay), the last a channels_last [8, 3, 5, 5] weight; with misalign
// every fifth starts one float into its storage, so that the kernel reads it
// one float at a time.
struct Params {
  std::vector<torch::Tensor> all, decay, no_decay;
};

Params make_params(torch::Device dev, bool misalign) {
  auto gen = at::detail::createCPUGenerator(17);
  Params ps;
  const auto n = sizes();
  for (size_t i = 0; i <= n.size(); i++) {
    auto values = i == n.size() ? torch::randn({8, 3, 5, 5}, gen).contiguous(at::MemoryFormat::ChannelsLast)
                                : torch::randn({n[i]}, gen);
    auto p = alike(values.to(dev), values, misalign && i % 5 == 1).detach().requires_grad_(true);
    ps.all.push_back(p);
    (i % 3 == 2 ? ps.no_decay : ps.decay).push_back(p);
  }
  return ps;
}

// Gradient k of tensor p (its index i): values over five decades, the same
// for every arm.
torch::Tensor gradient(const torch::Tensor& p, size_t i, int k) {
  auto gen = at::detail::createCPUGenerator(1000 * (k + 1) + int64_t(i));
  auto g = torch::randn(p.sizes(), gen) * std::pow(10.0, double(i % 5) - 2.0);
  return g.to(p.device()).contiguous(p.suggest_memory_format());
}

// Copies of ps (same values and layouts, misaligned where ps is).
Params copy(const Params& ps) {
  Params c;
  for (const auto& p : ps.all) c.all.push_back(alike(p, p.detach()).detach().requires_grad_(true));
  for (size_t i = 0; i < c.all.size(); i++) (i % 3 == 2 ? c.no_decay : c.decay).push_back(c.all[i]);
  return c;
}

// An optimizer over ps made under the kernel switch kernels (the "adam" kernel
// on or off).
std::unique_ptr<Optimizer> optimizer(const Params& ps, const char* kernels) {
  kernels::set_for_tests(kernels);
  auto o = std::make_unique<Optimizer>(ps.decay, ps.no_decay, default_optim(OptimizerKind::AdamW, kLr));
  kernels::set_for_tests("");
  return o;
}

// One step of o over ps with gradient k (times scale, folded back as the
// coefficient 1 / scale when scaled) and found_inf (undefined when never).
void step(Optimizer& o, const Params& ps, int k, bool scaled, const torch::Tensor& found_inf) {
  const double scale = scaled ? 1024.0 / 0.37 : 1.0;  // a loss scale and a clip coefficient
  for (size_t i = 0; i < ps.all.size(); i++)
    ps.all[i].mutable_grad() = gradient(ps.all[i], i, k) * scale;
  auto f64 = torch::TensorOptions().dtype(torch::kFloat64).device(ps.all[0].device());
  o.step(found_inf, scaled ? torch::full({}, 1.0 / scale, f64) : torch::Tensor());
}

// The engine path (host version) against the foreach path on the CPU.
int cpu_case(bool scaled) {
  const torch::Device cpu(torch::kCPU);
  const Params ref = make_params(cpu, false), eng = copy(ref), twin = copy(ref);
  auto oref = optimizer(ref, "-adam"), oeng = optimizer(eng, "adam"), otwin = optimizer(twin, "adam");
  CS_CHECK(oeng->implementation() == "engine-adamw" && oref->implementation() == "foreach-adamw");
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32);
  double worst = 0;
  for (int k = 0; k < kSteps; k++) {
    const bool skip = k == kSkipped;
    const auto found_inf = torch::full({}, skip ? 1.f : 0.f, f32);
    std::vector<torch::Tensor> before;
    for (const auto& p : eng.all) before.push_back(p.detach().clone());
    const int64_t version = eng.all[1]._version();
    step(*oref, ref, k, scaled, found_inf);
    step(*oeng, eng, k, scaled, found_inf);
    if (!skip) step(*otwin, twin, k, scaled, found_inf);
    CS_CHECK(oeng->folds_grad_coef() && !oref->folds_grad_coef());
    CS_CHECK(oeng->implementation() == "engine-adamw");
    CS_CHECK(eng.all[1]._version() > version || skip);  // written through pointers
    for (size_t i = 0; i < eng.all.size(); i++) {
      const auto pe = eng.all[i].detach(), pr = ref.all[i].detach();
      // Read, never written: the gradient as given (scaled, when it was).
      CS_CHECK(torch::equal(eng.all[i].grad(), gradient(pe, i, k) * (scaled ? 1024.0 / 0.37 : 1.0)));
      if (skip) {
        CS_CHECK(torch::equal(pe, before[i]));
        continue;
      }
      if (pe.numel() == 0) continue;
      CS_CHECK(!torch::equal(pe, before[i]));  // a step that changed nothing would pass below
      // The foreach path rounds its own way: p (1 - lr wd) with the factor
      // rounded to float, beta1 m + (1 - beta1) g in two roundings where the
      // kernel has two fmas, the bias corrections in double, the coefficient
      // multiplied in rather than its inverse divided out. Each step's
      // parameter moves by a few ulps of p and of the update (about lr at
      // most), which the later steps carry along: 7.6 at most measured here,
      // so 16. Missing the decay (lr wd |p| = 1e-3 |p|), a bias correction or
      // the coefficient is orders of magnitude past it.
      const auto eps = std::numeric_limits<float>::epsilon();
      const auto err = (pe.to(torch::kFloat64) - pr.to(torch::kFloat64)).abs() /
                       (eps * (pr.abs().to(torch::kFloat64) + kLr));
      worst = std::max(worst, err.max().item<double>());
    }
  }
  CS_CHECK(worst <= 16);
  // The skipped step left no trace: the same bits as the twin that never saw it.
  for (size_t i = 0; i < eng.all.size(); i++) CS_CHECK(torch::equal(eng.all[i].detach(), twin.all[i].detach()));
  std::cout << "  adamw host version vs foreach" << (scaled ? " (grad_scale)" : "")
            << ": within " << worst << " eps (|p| + lr)\n";
  return 0;
}

// Where the kernel cannot take the step, Optimizer leaves it to another path.
int cpu_fallbacks() {
  // A gradient not laid out as its parameter.
  auto p = torch::randn({8, 8, 3, 3}).contiguous(at::MemoryFormat::ChannelsLast).requires_grad_(true);
  kernels::set_for_tests("adam");
  Optimizer o({p}, {}, default_optim(OptimizerKind::AdamW, kLr));
  kernels::set_for_tests("");
  CS_CHECK(o.implementation() == "engine-adamw");  // the one intended
  p.mutable_grad() = torch::ones({8, 8, 3, 3});
  CS_CHECK(!o.folds_grad_coef());
  o.step(torch::Tensor());
  CS_CHECK(o.implementation() == "foreach-adamw");
  // The kernel switched off, or parameters it does not take (float64).
  auto q = torch::randn({5}).requires_grad_(true);
  auto d = torch::randn({5}, torch::kFloat64).requires_grad_(true);
  Params one;
  one.decay = {q};
  CS_CHECK(optimizer(one, "native")->implementation() == "foreach-adamw");
  one.decay = {q, d};
  CS_CHECK(optimizer(one, "adam")->implementation() == "foreach-adamw");
  return 0;
}

#if defined(CS_WITH_KERNELS) && CS_HAS_FUSED_ADAMW
// Tensors of the direct launcher cases: parameters, gradients and moments of
// one group each (decay, no decay), moments random (v >= 0) so that the first
// step does not start from zeros.
struct State {
  std::vector<torch::Tensor> p[2], g[2], m[2], v[2];
};

State make_state(bool misalign) {
  const Params ps = make_params(torch::kCUDA, misalign);
  State s;
  for (size_t i = 0; i < ps.all.size(); i++) {
    const int grp = i % 3 == 2 ? 1 : 0;
    const auto p = ps.all[i].detach();
    auto gen = at::detail::createCPUGenerator(77 + int64_t(i));
    s.p[grp].push_back(p);
    s.m[grp].push_back(alike(p, torch::randn(p.sizes(), gen) * 0.1));
    s.v[grp].push_back(alike(p, torch::rand(p.sizes(), gen) * 0.01));
    s.g[grp].push_back(p);  // replaced each step
  }
  return s;
}

State clone(const State& s) {
  State c;
  for (int grp = 0; grp < 2; grp++)
    for (size_t i = 0; i < s.p[grp].size(); i++) {
      c.p[grp].push_back(s.p[grp][i].clone());
      c.g[grp].push_back(s.g[grp][i].clone());
      c.m[grp].push_back(s.m[grp][i].clone());
      c.v[grp].push_back(s.v[grp][i].clone());
    }
  return c;
}

// Gradient k of every tensor, misaligned where its parameter is, and in
// every seventh 1-D tensor alone (a data-parallel bucket's view).
void set_gradients(State& s, int k, double scale) {
  for (int grp = 0; grp < 2; grp++)
    for (size_t i = 0; i < s.p[grp].size(); i++) {
      const auto& p = s.p[grp][i];
      s.g[grp][i] = alike(p, gradient(p, 3 * i + size_t(grp), k) * scale, p.dim() == 1 && i % 7 == 3);
    }
}

// The engine's launch over both groups (weight decay 0.1 and 0).
void engine_step(State& s, const torch::Tensor& step, const torch::Tensor& scale, const torch::Tensor& inf) {
  std::vector<kern::AdamwJob> jobs;
  for (int grp = 0; grp < 2; grp++)
    for (size_t i = 0; i < s.p[grp].size(); i++)
      jobs.push_back({s.p[grp][i].data_ptr<float>(), s.g[grp][i].data_ptr<float>(),
                      s.m[grp][i].data_ptr<float>(), s.v[grp][i].data_ptr<float>(),
                      s.p[grp][i].numel(), grp == 0 ? 0.1 : 0.0});
  const auto o = default_optim(OptimizerKind::AdamW, kLr);
  glue::check(cuda::adamw_many(jobs.data(), int(jobs.size()), {o.lr, o.beta1, o.beta2, o.eps},
                               step.data_ptr<float>(), scale.defined() ? scale.data_ptr<float>() : nullptr,
                               inf.defined() ? inf.data_ptr<float>() : nullptr, glue::stream()),
              "adamw_many");
}

// PyTorch's fused AdamW, one call per group, as Optimizer::adamw_fused.
void torch_step(State& s, const torch::Tensor& step, const torch::Tensor& scale, const torch::Tensor& inf) {
  const auto o = default_optim(OptimizerKind::AdamW, kLr);
  c10::optional<torch::Tensor> sc, fi;
  if (scale.defined()) sc = scale;
  if (inf.defined()) fi = inf;
  for (int grp = 0; grp < 2; grp++) {
    std::vector<torch::Tensor> steps(s.p[grp].size(), step);
    at::_fused_adamw_(s.p[grp], s.g[grp], s.m[grp], s.v[grp], {}, steps, o.lr, o.beta1, o.beta2,
                      grp == 0 ? 0.1 : 0.0, o.eps, false, false, sc, fi);
  }
}

// The launcher against at::_fused_adamw_ over kSteps steps: every value the
// same bits (the largest distance in ulps printed either way).
int cuda_direct(bool scaled, bool misalign) {
  State eng = make_state(misalign), ref = clone(eng), again = clone(eng);
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCUDA);
  auto step_e = torch::zeros({}, f32), step_r = torch::zeros({}, f32), step_a = torch::zeros({}, f32);
  const double mult = scaled ? 1024.0 / 0.37 : 1.0;
  const auto scale = scaled ? torch::full({}, 1.0 / (1.0 / mult), f32) : torch::Tensor();
  int64_t ulps[3] = {0, 0, 0};
  for (int k = 0; k < kSteps; k++) {
    const auto inf = torch::full({}, k == kSkipped ? 1.f : 0.f, f32);
    for (State* s : {&eng, &ref, &again}) set_gradients(*s, k, mult);
    std::vector<torch::Tensor> given;
    for (const auto& g : eng.g[0]) given.push_back(g.clone());
    for (auto* st : {&step_e, &step_r, &step_a}) st->add_(1.0 - inf);  // as Optimizer::step
    engine_step(eng, step_e, scale, inf);
    engine_step(again, step_a, scale, inf);
    torch_step(ref, step_r, scale, inf);
    for (size_t i = 0; i < given.size(); i++) CS_CHECK(torch::equal(eng.g[0][i], given[i]));
    for (int grp = 0; grp < 2; grp++)
      for (size_t i = 0; i < eng.p[grp].size(); i++) {
        ulps[0] = std::max(ulps[0], max_ulps(eng.p[grp][i], ref.p[grp][i]));
        ulps[1] = std::max(ulps[1], max_ulps(eng.m[grp][i], ref.m[grp][i]));
        ulps[2] = std::max(ulps[2], max_ulps(eng.v[grp][i], ref.v[grp][i]));
        CS_CHECK(torch::equal(eng.p[grp][i], again.p[grp][i]));  // repeatable
        CS_CHECK(torch::equal(eng.m[grp][i], again.m[grp][i]));
      }
  }
  std::cout << "  adamw cuda vs at::_fused_adamw_" << (scaled ? " (grad_scale)" : "")
            << (misalign ? " (misaligned)" : "") << ": largest distance p " << ulps[0] << ", m "
            << ulps[1] << ", v " << ulps[2] << " ulps\n";
  CS_CHECK(ulps[0] == 0 && ulps[1] == 0 && ulps[2] == 0);
  return 0;
}

// The launch captured in a CUDA graph and replayed: what the eager launch gives.
int cuda_graph() {
  State eager = make_state(true);
  set_gradients(eager, 0, 1.0);
  State graphed = clone(eager);
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCUDA);
  auto step = torch::ones({}, f32), scale = torch::full({}, 3.f, f32), inf = torch::zeros({}, f32);
  engine_step(eager, step, scale, inf);
  at::cuda::CUDAGraph graph;
  {
    c10::cuda::CUDAStreamGuard guard(c10::cuda::getStreamFromPool());
    graph.capture_begin();
    engine_step(graphed, step, scale, inf);
    graph.capture_end();
  }
  graph.replay();
  torch::cuda::synchronize();
  for (int grp = 0; grp < 2; grp++)
    for (size_t i = 0; i < eager.p[grp].size(); i++) CS_CHECK(torch::equal(eager.p[grp][i], graphed.p[grp][i]));
  return 0;
}
// Optimizer's engine path against its PyTorch-fused (CUDA) path: the same bits.
int cuda_optimizer(bool scaled) {
  const Params ref = make_params(torch::kCUDA, true), eng = copy(ref);
  auto oref = optimizer(ref, "-adam"), oeng = optimizer(eng, "adam");
  CS_CHECK(oeng->implementation() == "engine-adamw");
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(torch::kCUDA);
  for (int k = 0; k < kSteps; k++) {
    const auto found_inf = torch::full({}, k == kSkipped ? 1.f : 0.f, f32);
    step(*oref, ref, k, scaled, found_inf);
    step(*oeng, eng, k, scaled, found_inf);
    CS_CHECK(oeng->implementation() == "engine-adamw" && oeng->folds_grad_coef());
    for (size_t i = 0; i < eng.all.size(); i++) CS_CHECK(torch::equal(eng.all[i].detach(), ref.all[i].detach()));
  }
  std::cout << "  adamw optimizer cuda: engine-adamw equals " << oref->implementation()
            << (scaled ? " (grad_scale)" : "") << "\n";
  return 0;
}
#endif

}  // namespace

int adamw_tests() {
  int rc = 0;
  {
    HostKernels host;
    for (bool scaled : {false, true})
      if (rc == 0)
        rc = run_case("adamw", std::string("cpu host version") + (scaled ? " scaled" : ""),
                      [&] { return cpu_case(scaled); });
    if (rc == 0) rc = run_case("adamw", "cpu fallbacks", cpu_fallbacks);
  }
  if (rc != 0) return rc;
  std::cout << "  adamw host version cpu ok\n";
  if (!cuda_cases_run("adamw")) return 0;
#if defined(CS_WITH_KERNELS) && CS_HAS_FUSED_ADAMW
  for (bool scaled : {false, true})
    for (bool misalign : {false, true})
      if (rc == 0)
        rc = run_case("adamw", std::string("cuda direct") + (scaled ? " scaled" : "") + (misalign ? " misaligned" : ""),
                      [&] { return cuda_direct(scaled, misalign); });
  if (rc == 0) rc = run_case("adamw", "cuda graph", cuda_graph);
  for (bool scaled : {false, true})
    if (rc == 0)
      rc = run_case("adamw", std::string("cuda optimizer") + (scaled ? " scaled" : ""),
                    [&] { return cuda_optimizer(scaled); });
  if (rc == 0) std::cout << "  adamw cuda ok\n";
#else
  std::cerr << "FAIL adamw: CUDA kernels without PyTorch's fused AdamW to compare with\n";
  rc = 1;
#endif
  return rc;
}
