// adamc_test.cpp: the "adamc" switch (kernels.h): the AdamW kernel writing
// the linear layers' low-precision copies as it updates their fp32 masters
// (cuda/adamw.cu, host_kernels.cpp), the copies kept across steps
// (LinearCopies, linear_casts.h) and Optimizer's path between them (optim.h).
//   direct: the launch with copies against the same launch without, over 70
//     tensors (two launches of 64) of sizes around the kernel's packs and
//     blocks, some parameters and some copies misaligned (the one-by-one
//     path): parameters and both moments the same bits, every copy the bits
//     of the updated parameter's cast (.to(dtype)), a skipped step
//     (found_inf) writing no copy; bf16 and fp16.
//   optimizer: Optimizer with and without kept copies, the same bits; a copy
//     stays valid across its steps, one whose master something else wrote
//     stays invalid (a skipped step leaves it stale: marking it valid would
//     serve stale weights), one something else holds is not written.
//   writers: after each writer of a weight other than the optimizer (a
//     checkpoint's copy_, set_data as ZeRO's flat buffer and tensor
//     parallel's shards, a raw write with bump_version as the collectives, an
//     in-place op as torch's optimizers) the next LinearCasts casts it again,
//     and linear_act computes with the new weights; a copy still held by
//     someone is replaced, not overwritten.
//   training: BERT tiny, 6 steps of bf16 autocast with and without "adamc",
//     weights loaded from another model mid-way: the same losses and
//     parameters bit for bit.
// On the CPU through the kernels' host versions; on CUDA the direct and
// optimizer cases again through the kernel, and the launch in a CUDA graph.
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <memory>

#include "compat.h"
#include "host_kernels.h"
#include "kernels.h"
#include "kernels_glue.h"
#include "linear_act.h"
#include "linear_casts.h"
#include "model.h"
#include "native_test.h"
#include "optim.h"

#ifdef CS_WITH_KERNELS
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>

#include "cuda/kernels_cuda.h"
#endif

using namespace cs;

namespace {

constexpr double kLr = 1e-2;
constexpr int kSteps = 5, kSkipped = 2;

std::vector<int64_t> sizes() {
  std::vector<int64_t> n = {0, 1, 3, 4, 5, 1023, 2047, 2048, 2049, 8191, 8192, 8193, 16389, 100003};
  auto gen = at::detail::createCPUGenerator(9);
  while (n.size() < 70) n.push_back(1 + torch::randint(5000, {1}, gen).item<int64_t>());
  return n;
}

// n values on dev, starting one element into their storage when misaligned.
torch::Tensor place(const torch::Tensor& values, torch::Device dev, at::ScalarType dt, bool misalign) {
  const int64_t n = values.numel();
  if (!misalign) return values.to(dev, dt).contiguous();
  return torch::empty({n + 1}, values.options().device(dev).dtype(dt)).narrow(0, 1, n).copy_(values);
}

struct Job {
  torch::Tensor p, g, m, v, copy;  // copy undefined: none
};

// Tensor i: every fifth parameter (and its states) misaligned; every fourth
// without a copy, every sixth with a misaligned one.
std::vector<Job> make_jobs(torch::Device dev, at::ScalarType cdt, bool copies) {
  std::vector<Job> jobs;
  const auto n = sizes();
  for (size_t i = 0; i < n.size(); i++) {
    auto gen = at::detail::createCPUGenerator(31 + int64_t(i));
    const bool mis = i % 5 == 1;
    Job j;
    j.p = place(torch::randn({n[i]}, gen), dev, torch::kFloat32, mis);
    j.m = place(torch::randn({n[i]}, gen) * 0.1, dev, torch::kFloat32, mis);
    j.v = place(torch::rand({n[i]}, gen) * 0.01, dev, torch::kFloat32, mis);
    j.g = place(torch::zeros({n[i]}), dev, torch::kFloat32, mis);
    if (copies && i % 4 != 3) j.copy = place(torch::zeros({n[i]}), dev, cdt, i % 6 == 2);
    jobs.push_back(j);
  }
  return jobs;
}

void launch(std::vector<Job>& js, at::ScalarType cdt, const torch::Tensor& step,
            const torch::Tensor& scale, const torch::Tensor& inf) {
  std::vector<kern::AdamwJob> jobs;
  for (size_t i = 0; i < js.size(); i++) {
    auto& j = js[i];
    kern::AdamwJob a{j.p.data_ptr<float>(), j.g.data_ptr<float>(), j.m.data_ptr<float>(),
                     j.v.data_ptr<float>(), j.p.numel(), i % 3 == 2 ? 0.0 : 0.1};
    if (j.copy.defined()) {
      a.copy = j.copy.data_ptr();
      a.copy_dt = cdt == torch::kBFloat16 ? kern::DType::BF16 : kern::DType::F16;
    }
    jobs.push_back(a);
  }
  const auto o = default_optim(OptimizerKind::AdamW, kLr);
  const kern::AdamwHyper h{o.lr, o.beta1, o.beta2, o.eps};
  const float* sc = scale.defined() ? scale.data_ptr<float>() : nullptr;
  if (step.is_cpu()) {
    host::adamw_many(jobs.data(), int(jobs.size()), h, step.data_ptr<float>(), sc, inf.data_ptr<float>());
    return;
  }
#ifdef CS_WITH_KERNELS
  glue::check(cuda::adamw_many(jobs.data(), int(jobs.size()), h, step.data_ptr<float>(), sc,
                               inf.data_ptr<float>(), glue::stream()),
              "adamw_many");
#endif
}

// The launch with copies against the launch without, kSteps steps.
int direct(torch::Device dev, at::ScalarType cdt) {
  auto plain = make_jobs(dev, cdt, false), with = make_jobs(dev, cdt, true);
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(dev);
  auto step = torch::zeros({}, f32);
  const auto scale = torch::full({}, 1024.f, f32);
  int copies = 0;
  for (const auto& j : with) copies += j.copy.defined() ? 1 : 0;
  CS_CHECK(copies > 40);
  for (int k = 0; k < kSteps; k++) {
    const bool skip = k == kSkipped;
    const auto inf = torch::full({}, skip ? 1.f : 0.f, f32);
    for (size_t i = 0; i < plain.size(); i++) {
      auto gen = at::detail::createCPUGenerator(1000 * (k + 1) + int64_t(i));
      const auto g = torch::randn({plain[i].p.numel()}, gen) * std::pow(10.0, double(i % 5)) ;
      plain[i].g.copy_(g);
      with[i].g.copy_(g);
    }
    std::vector<torch::Tensor> before;
    for (const auto& j : with) before.push_back(j.copy.defined() ? j.copy.clone() : torch::Tensor());
    step.add_(1.0 - inf);
    launch(plain, cdt, step, k % 2 ? scale : torch::Tensor(), inf);
    launch(with, cdt, step, k % 2 ? scale : torch::Tensor(), inf);
    for (size_t i = 0; i < plain.size(); i++) {
      CS_CHECK(torch::equal(plain[i].p, with[i].p));
      CS_CHECK(torch::equal(plain[i].m, with[i].m));
      CS_CHECK(torch::equal(plain[i].v, with[i].v));
      if (!with[i].copy.defined()) continue;
      if (skip) {
        CS_CHECK(torch::equal(with[i].copy, before[i]));  // written by nothing
        continue;
      }
      CS_CHECK(torch::equal(with[i].copy, with[i].p.to(cdt)));
      CS_CHECK(with[i].p.numel() == 0 || !torch::equal(with[i].copy, before[i]));
    }
  }
  std::cout << "  adamc direct " << dev << " " << c10::toString(cdt) << ": p, m, v equal the launch without "
            << copies << " copies; each copy the updated parameter's cast\n";
  return 0;
}

using Params = std::vector<torch::Tensor>;

Params make_params(torch::Device dev) {
  Params ps;
  const auto n = sizes();
  for (size_t i = 0; i < n.size(); i++) {
    auto gen = at::detail::createCPUGenerator(57 + int64_t(i));
    ps.push_back(place(torch::randn({n[i]}, gen), dev, torch::kFloat32, i % 5 == 1).detach().requires_grad_(true));
  }
  // A weight not contiguous: the kernel updates it, no copy is written.
  ps.push_back(torch::randn({8, 3, 5, 5}).to(dev).contiguous(at::MemoryFormat::ChannelsLast).requires_grad_(true));
  return ps;
}

std::unique_ptr<Optimizer> optimizer(const Params& ps) {
  Params decay, no_decay;
  for (size_t i = 0; i < ps.size(); i++) (i % 3 == 2 ? no_decay : decay).push_back(ps[i]);
  auto o = std::make_unique<Optimizer>(decay, no_decay, default_optim(OptimizerKind::AdamW, kLr));
  if (o->implementation() != "engine-adamw") throw std::runtime_error("not the engine's AdamW");
  return o;
}

// Optimizer with kept copies against one without.
int optimizer_case(torch::Device dev, at::ScalarType cdt) {
  kernels::set_for_tests("");
  const Params ref = make_params(dev);
  Params eng;
  for (const auto& p : ref) eng.push_back(p.detach().clone().requires_grad_(true));
  auto oref = optimizer(ref), oeng = optimizer(eng);
  auto keep = std::make_shared<LinearCopies>();
  oeng->keep_copies(keep);
  const size_t stale = 5, held = 8, flat = eng.size() - 1;
  for (size_t i = 0; i < eng.size(); i++)
    if (i % 3 != 1 || i == flat) keep->claim(eng[i], cdt).copy_(eng[i].detach().to(cdt));  // as LinearCasts
  const size_t kept = keep->size();
  CS_CHECK(keep->valid_count() == kept);
  torch::Tensor hold, stale_copy;
  for (int k = 0; k < kSteps; k++) {
    const bool skip = k == kSkipped;
    const auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(dev);
    if (skip) {  // another writer: the copy of tensor `stale` no longer its cast
      stale_copy = keep->valid(eng[stale], cdt);  // the same TensorImpl: a holder (sole), never rewritten
      CS_CHECK(stale_copy.defined());
      ref[stale].detach().mul_(2);
      eng[stale].detach().mul_(2);
      CS_CHECK(!keep->valid(eng[stale], cdt).defined());
      hold = keep->valid(eng[held], cdt).view({-1});  // as a forward's saved weight
      CS_CHECK(hold.defined());
    }
    for (size_t i = 0; i < ref.size(); i++) {
      auto gen = at::detail::createCPUGenerator(7000 * (k + 1) + int64_t(i));
      const auto g = torch::randn(ref[i].sizes(), gen).to(dev).contiguous(ref[i].suggest_memory_format());
      ref[i].mutable_grad() = g.clone();
      eng[i].mutable_grad() = g.clone();
    }
    const auto inf = torch::full({}, skip ? 1.f : 0.f, f32);
    const auto before = hold.defined() ? hold.clone() : torch::Tensor();
    oref->step(inf);
    oeng->step(inf);
    for (size_t i = 0; i < eng.size(); i++) CS_CHECK(torch::equal(ref[i].detach(), eng[i].detach()));
    for (size_t i = 0; i < eng.size(); i++) {
      const auto c = keep->valid(eng[i], cdt);
      const bool expect = i % 3 != 1 && i != flat && !(k >= kSkipped && (i == stale || i == held));
      CS_CHECK(c.defined() == expect);
      if (expect) CS_CHECK(torch::equal(c, eng[i].detach().to(cdt)));
    }
    if (hold.defined()) CS_CHECK(torch::equal(hold, before));  // held: not written
    // Skipped: the stale copy kept its old values, which a forward must not see.
    if (skip) CS_CHECK(!torch::equal(stale_copy, eng[stale].detach().to(cdt)));
  }
  std::cout << "  adamc optimizer " << dev << " " << c10::toString(cdt) << ": equals the one without copies; "
            << keep->valid_count() << " of " << kept << " copies valid (a stale, a held, a channels_last one not)\n";
  return 0;
}

// Every writer of a weight other than the optimizer invalidates its copy.
int writers_case() {
  kernels::set_for_tests("");
  const auto dt = torch::kBFloat16;
  auto x = torch::randn({37, 48}), w = (torch::randn({64, 48}) * 0.1).requires_grad_(true),
       b = torch::randn({64}).requires_grad_(true);
  compat::set_autocast(torch::kCPU, true, dt);
  struct Off {
    ~Off() { compat::set_autocast(torch::kCPU, false, torch::kBFloat16); }
  } off;
  LinearCopies keep;
  auto forward = [&](size_t expect_cast) -> int {
    torch::Tensor y;
    {
      LinearCasts casts({w, b}, &keep);
      CS_CHECK(casts.size() == 2 && casts.cast_count() == expect_cast);
      y = linear_act(x, w, b, Act::None);
      CS_CHECK(casts.served() == 2);
    }
    // What the layer computes from the weights as they are, casting them itself.
    CS_CHECK(torch::equal(y, linear_act(x, w, b, Act::None)));
    return 0;
  };
  CS_CHECK(forward(2) == 0);
  const void* buffer = keep.valid(w, dt).data_ptr();
  keep.clear_served();
  CS_CHECK(forward(0) == 0);  // nothing changed: nothing cast
  CS_CHECK(keep.served_valid());
  w.detach().mul_(1.5);  // written after the forward read the copies uncast (a graph's replay would be stale)
  CS_CHECK(!keep.served_valid());
  CS_CHECK(forward(1) == 0);  // cast again: no longer served uncast
  CS_CHECK(keep.served_valid());
  torch::NoGradGuard ng;
  auto fresh = [&] { return torch::randn({64, 48}) * 0.1; };
  // A checkpoint's load (copy_).
  w.detach().copy_(fresh());
  CS_CHECK(forward(1) == 0);
  CS_CHECK(keep.valid(w, dt).data_ptr() == buffer);  // the same buffer, cast again
  // set_data: ZeRO's flat buffer, tensor parallel's shards, a pipeline's release.
  w.set_data(fresh());
  CS_CHECK(forward(1) == 0);
  // A raw write, bumped after: the collectives (the initial broadcast, ZeRO's all-gathers).
  const auto src = fresh();
  std::memcpy(w.data_ptr<float>(), src.data_ptr<float>(), size_t(src.numel()) * sizeof(float));
  torch::autograd::impl::bump_version(w);
  CS_CHECK(forward(1) == 0);
  // An in-place op: torch's optimizers (foreach, fused), a loss of precision's fix-ups.
  w.detach().mul_(0.5);
  CS_CHECK(forward(1) == 0);
  // Still held by someone (a forward whose backward has not run): a new buffer.
  const auto held = keep.valid(w, dt).view({-1}), was = held.clone();
  w.detach().add_(1.0);
  CS_CHECK(forward(1) == 0);
  CS_CHECK(keep.valid(w, dt).data_ptr() != held.data_ptr() && torch::equal(held, was));
  // Held as autograd holds a saved input that is not an output (SavedVariable:
  // the same TensorImpl, no view): a new buffer too.
  const auto same = keep.valid(w, dt), same_was = same.clone();
  CS_CHECK(same.defined());
  w.detach().add_(1.0);
  CS_CHECK(forward(1) == 0);
  CS_CHECK(keep.valid(w, dt).data_ptr() != same.data_ptr() && torch::equal(same, same_was));
  // Switched off: nothing kept, every forward casts.
  kernels::set_for_tests("-adamc");
  LinearCopies none;
  {
    LinearCasts casts({w, b}, &none);
    CS_CHECK(casts.size() == 2 && casts.cast_count() == 2 && none.size() == 0);
  }
  kernels::set_for_tests("");
  std::cout << "  adamc writers: copy_, set_data, raw write + bump_version, in-place op each cast again\n";
  return 0;
}

// BERT tiny trained 6 steps with the kernel switch value kernels, weights
// loaded from another model (seed 4) before step 3; the losses.
int train(const char* kernels, std::vector<double>& losses, Params& final_params, size_t& kept) {
  kernels::set_for_tests(kernels);
  ModelConfig cfg;
  cfg.family = "bert";
  cfg.preset = "tiny";
  cfg.micro_batch = 2;
  cfg.seed = 3;
  const torch::Device cpu(torch::kCPU);
  const auto& fam = family("bert");
  auto model = fam.build(cfg, cpu);
  ModelConfig other_cfg = cfg;
  other_cfg.seed = 4;
  auto other = fam.build(other_cfg, cpu);
  auto data = fam.data(cfg, cpu, 0, 1);
  Params decay, no_decay;
  for (const auto& kv : model->named_parameters()) (model->decays(kv.key()) ? decay : no_decay).push_back(kv.value());
  Optimizer o(decay, no_decay, default_optim(OptimizerKind::AdamW, 1e-3));
  CS_CHECK(o.implementation() == "engine-adamw");
  auto* owner = dynamic_cast<LinearCopiesModel*>(model.get());
  CS_CHECK(owner != nullptr && owner->linear_copies() != nullptr);
  auto keep = owner->linear_copies();
  o.keep_copies(keep);
  for (int s = 0; s < 6; s++) {
    if (s == 3) {  // a checkpoint's load
      torch::NoGradGuard ng;
      auto src = other->parameters();
      auto dst = model->parameters();
      for (size_t i = 0; i < dst.size(); i++) dst[i].copy_(src[i]);
      CS_CHECK(keep->size() == 0 || keep->valid_count() == 0);
    }
    for (auto& p : model->parameters()) p.mutable_grad() = torch::Tensor();
    const auto batch = data->next();
    torch::Tensor loss;
    {
      compat::set_autocast(torch::kCPU, true, torch::kBFloat16);
      loss = model->forward_loss(batch);
      compat::set_autocast(torch::kCPU, false, torch::kBFloat16);
      at::autocast::clear_cache();
    }
    loss.backward();
    o.step(torch::Tensor());
    losses.push_back(loss.item<double>());
    CS_CHECK(keep->valid_count() == keep->size());  // the optimizer kept every copy valid
  }
  kept = keep->size();
  for (const auto& p : model->parameters()) final_params.push_back(p.detach().clone());
  kernels::set_for_tests("");
  return 0;
}

int training_case() {
  std::vector<double> on, off;
  Params pon, poff;
  size_t kept_on = 0, kept_off = 0;
  CS_CHECK(train("", on, pon, kept_on) == 0);
  CS_CHECK(train("-adamc", off, poff, kept_off) == 0);
  CS_CHECK(kept_on > 0 && kept_off == 0);
  CS_CHECK(on.size() == off.size());
  for (size_t i = 0; i < on.size(); i++) CS_CHECK(on[i] == off[i]);
  for (size_t i = 0; i < pon.size(); i++) CS_CHECK(torch::equal(pon[i], poff[i]));
  std::cout << "  adamc training: BERT tiny bf16, 6 steps, a load at step 3: losses";
  for (double l : on) std::cout << " " << l;
  std::cout << " with and without (" << kept_on << " copies kept)\n";
  return 0;
}

#ifdef CS_WITH_KERNELS
// The launch with copies captured in a CUDA graph and replayed: the eager bits.
int cuda_graph() {
  const torch::Device dev(torch::kCUDA);
  const auto cdt = torch::kBFloat16;
  auto eager = make_jobs(dev, cdt, true), graphed = make_jobs(dev, cdt, true);
  for (auto* js : {&eager, &graphed})
    for (auto& j : *js) j.g.normal_();
  for (size_t i = 0; i < eager.size(); i++) graphed[i].g.copy_(eager[i].g);
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(dev);
  auto step = torch::ones({}, f32), inf = torch::zeros({}, f32);
  launch(eager, cdt, step, torch::Tensor(), inf);
  at::cuda::CUDAGraph graph;
  {
    c10::cuda::CUDAStreamGuard guard(c10::cuda::getStreamFromPool());
    graph.capture_begin();
    launch(graphed, cdt, step, torch::Tensor(), inf);
    graph.capture_end();
  }
  graph.replay();
  torch::cuda::synchronize();
  for (size_t i = 0; i < eager.size(); i++) {
    CS_CHECK(torch::equal(eager[i].p, graphed[i].p));
    if (eager[i].copy.defined()) CS_CHECK(torch::equal(eager[i].copy, graphed[i].copy));
  }
  return 0;
}
#endif

}  // namespace

int adamc_tests() {
  int rc = 0;
  {
    HostKernels host;
    const torch::Device cpu(torch::kCPU);
    for (auto dt : {torch::kBFloat16, torch::kHalf}) {
      if (rc == 0) rc = run_case("adamc", "cpu direct", [&] { return direct(cpu, dt); });
      if (rc == 0) rc = run_case("adamc", "cpu optimizer", [&] { return optimizer_case(cpu, dt); });
    }
    if (rc == 0) rc = run_case("adamc", "cpu writers", writers_case);
    if (rc == 0) rc = run_case("adamc", "cpu training", training_case);
  }
  kernels::set_for_tests("");
  if (rc != 0) return rc;
  std::cout << "  adamc host version cpu ok\n";
  if (!cuda_cases_run("adamc")) return 0;
#ifdef CS_WITH_KERNELS
  const torch::Device cuda(torch::kCUDA);
  for (auto dt : {torch::kBFloat16, torch::kHalf}) {
    if (rc == 0) rc = run_case("adamc", "cuda direct", [&] { return direct(cuda, dt); });
    if (rc == 0) rc = run_case("adamc", "cuda optimizer", [&] { return optimizer_case(cuda, dt); });
  }
  if (rc == 0) rc = run_case("adamc", "cuda graph", cuda_graph);
  if (rc == 0) std::cout << "  adamc cuda ok\n";
#endif
  return rc;
}
