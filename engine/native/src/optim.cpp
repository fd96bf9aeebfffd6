// optim.cpp: AdamW (the engine's kernel, PyTorch's fused CUDA kernel or
// foreach), SGD with momentum, clipping.
#include "optim.h"

#include <cmath>

#include "compat.h"
#include "kernels.h"
#include "kernels_glue.h"
#include "linear_casts.h"

namespace cs {
namespace {

// Whether PyTorch has a fused kernel of this optimizer kind for tensors on dev.
bool torch_fused(OptimizerKind kind, const torch::Device& dev) {
  if (!dev.is_cuda()) return false;
  return kind == OptimizerKind::AdamW ? CS_HAS_FUSED_ADAMW : CS_HAS_FUSED_SGD;
}

// Whether the engine's AdamW kernel can update p (and its moments, laid out
// as p): fp32 on dev, one dense run of memory, where the kernels run.
bool engine_takes(const torch::Tensor& p, const torch::Device& dev) {
  return p.scalar_type() == torch::kFloat32 && p.device() == dev && glue::runs_here(p) &&
         p.is_non_overlapping_and_dense();
}

}  // namespace

OptimOptions default_optim(OptimizerKind kind, double lr) {
  OptimOptions o;
  o.kind = kind;
  o.lr = lr;
  o.weight_decay = kind == OptimizerKind::AdamW ? 0.1 : 1e-4;
  return o;
}

Optimizer::Optimizer(std::vector<torch::Tensor> decay, std::vector<torch::Tensor> no_decay,
                     const OptimOptions& o)
    : o_(o) {
  torch::NoGradGuard ng;
  for (int i = 0; i < 2; i++) {
    Group g;
    g.params = i == 0 ? std::move(decay) : std::move(no_decay);
    g.wd = i == 0 ? o.weight_decay : 0.0;
    if (g.params.empty()) continue;
    for (const auto& p : g.params) {
      g.m.push_back(torch::zeros_like(p));
      if (o.kind == OptimizerKind::AdamW) g.v.push_back(torch::zeros_like(p));
    }
    groups_.push_back(std::move(g));
  }
  if (groups_.empty()) throw ConfigError("the model has no parameters to train");
  const auto dev = groups_[0].params[0].device();
  fused_ = torch_fused(o.kind, dev);
  engine_ = o.kind == OptimizerKind::AdamW && kernels::enabled("adam");
  for (const auto& g : groups_)
    for (const auto& p : g.params) engine_ = engine_ && engine_takes(p, dev);
  fused_ = fused_ || engine_;
  step_t_ = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat32).device(dev));
}

std::string Optimizer::implementation() const {
  if (o_.kind == OptimizerKind::SGDMomentum) return fused_ ? "fused-sgd-momentum" : "sgd-momentum";
  if (engine_) return "engine-adamw";
  return fused_ ? "fused-adamw" : "foreach-adamw";
}

int64_t Optimizer::state_bytes() const {
  int64_t n = 0;
  for (const auto& g : groups_) {
    for (const auto& t : g.m) n += t.numel() * int64_t(t.element_size());
    for (const auto& t : g.v) n += t.numel() * int64_t(t.element_size());
  }
  return n;
}

void Optimizer::decide() {
  if (decided_) return;
  bool laid_out = true, fp32 = true;
  for (const auto& g : groups_)
    for (const auto& p : g.params) {
      const auto& grad = p.grad();
      if (!grad.defined()) continue;
      decided_ = true;  // once the gradients exist
      laid_out = laid_out && grad.strides() == p.strides();
      fp32 = fp32 && grad.scalar_type() == torch::kFloat32 && grad.device() == p.device();
    }
  if (!decided_) return;
  if (engine_ && !fp32) {
    engine_ = false;
    fused_ = torch_fused(o_.kind, step_t_.device());
  }
  if (!laid_out) fused_ = engine_ = false;
}

void Optimizer::step(const torch::Tensor& found_inf, const torch::Tensor& grad_coef) {
  torch::NoGradGuard ng;
  decide();
  // Only the engine's AdamW writes the copies (adamw_engine): any other
  // update leaves those of the parameters it changes invalid.
  if (copies_ && !engine_)
    for (const auto& g : groups_)
      for (const auto& p : g.params)
        if (p.grad().defined()) copies_->updated(p, false);
  if (fused_) {
    // The fused kernels divide each gradient by grad_scale as they read it.
    torch::Tensor scale;
    if (grad_coef.defined()) scale = grad_coef.to(torch::kFloat64).reciprocal().to(torch::kFloat32);
    if (o_.kind == OptimizerKind::SGDMomentum) {
      for (auto& g : groups_) sgd_fused(g, found_inf, scale);
      return;
    }
    // One device counter shared by every parameter; a skipped step does not count.
    if (found_inf.defined())
      step_t_.add_(1.0 - found_inf);
    else
      step_t_.add_(1.0);
    if (engine_)
      adamw_engine(found_inf, scale);
    else
      for (auto& g : groups_) adamw_fused(g, found_inf, scale);
    return;
  }
  if (grad_coef.defined()) {
    auto coef = grad_coef.to(torch::kFloat32);
    for (auto& g : groups_) {
      std::vector<torch::Tensor> grads;
      for (const auto& p : g.params) grads.push_back(p.grad());
      compat::foreach_mul(grads, coef);
    }
  }
  if (o_.kind == OptimizerKind::SGDMomentum) {
    for (auto& g : groups_) sgd(g, found_inf);
    return;
  }
  // foreach path (CPU, or libtorch without the fused kernel): the skip decision
  // reads found_inf on the host, which is free on CPU.
  if (found_inf.defined() && found_inf.item<float>() != 0) return;
  step_++;
  for (auto& g : groups_) adamw_foreach(g);
}

void Optimizer::adamw_fused(Group& g, const torch::Tensor& found_inf,
                            const torch::Tensor& grad_scale) {
#if CS_HAS_FUSED_ADAMW
  std::vector<torch::Tensor> grads;
  grads.reserve(g.params.size());
  for (const auto& p : g.params) grads.push_back(p.grad());
  std::vector<torch::Tensor> steps(g.params.size(), step_t_);
  c10::optional<torch::Tensor> inf, scale;
  if (found_inf.defined()) inf = found_inf;
  if (grad_scale.defined()) scale = grad_scale;
  at::_fused_adamw_(g.params, grads, g.m, g.v, /*max_exp_avg_sqs=*/{}, steps, o_.lr, o_.beta1,
                    o_.beta2, g.wd, o_.eps, /*amsgrad=*/false, /*maximize=*/false, scale, inf);
#else
  (void)g, (void)found_inf, (void)grad_scale;
  throw UnsupportedError("fused AdamW is not available in this libtorch");
#endif
}

// The engine's kernel reads each gradient and writes nothing back to it (the
// step's gradients are not read again); the scalars stay on the device.
void Optimizer::adamw_engine(const torch::Tensor& found_inf, const torch::Tensor& grad_scale) {
  const auto dev = step_t_.device();
  // The copies this step writes ("adamc"), and whether each was valid before
  // it: a skipped step writes none, and leaves valid only those that were.
  const bool copies = copies_ && kernels::enabled("adamc");
  std::vector<std::pair<torch::Tensor, bool>> written;
  std::vector<kern::AdamwJob> jobs;
  for (auto& g : groups_)
    for (size_t i = 0; i < g.params.size(); i++) {
      const auto& p = g.params[i];
      const auto& grad = p.grad();
      if (!grad.defined()) continue;  // no gradient, no update (as torch.optim)
      TORCH_CHECK(grad.scalar_type() == torch::kFloat32 && grad.device() == dev &&
                      grad.strides() == p.strides(),
                  "engine AdamW: a gradient not laid out as its ", p.sizes(), " parameter");
      kern::AdamwJob job{p.data_ptr<float>(), grad.data_ptr<float>(), g.m[i].data_ptr<float>(),
                         g.v[i].data_ptr<float>(), p.numel(), g.wd};
      const auto t = copies ? copies_->target(p) : LinearCopies::Target{};
      job.copy = t.dst;
      job.copy_dt = t.dt;
      if (copies_) written.emplace_back(p, t.writes && t.valid);
      jobs.push_back(job);
    }
  auto scalar = [&](const torch::Tensor& t, const char* what) -> const float* {
    if (!t.defined()) return nullptr;
    TORCH_CHECK(t.scalar_type() == torch::kFloat32 && t.numel() == 1 && t.device() == dev,
                "engine AdamW: ", what, " must be one float32 on the parameters' device");
    return t.data_ptr<float>();
  };
  const float* inf = scalar(found_inf, "found_inf");
  const float* scale = scalar(grad_scale, "grad_scale");
  const kern::AdamwHyper h{o_.lr, o_.beta1, o_.beta2, o_.eps};
  CS_KERNEL(step_t_, "engine AdamW kernel", adamw_many, jobs.data(), int(jobs.size()), h,
            step_t_.data_ptr<float>(), scale, inf);
  // Written through raw pointers: what reads versions (autograd's saved
  // tensors, LinearCasts) must see the change, as after PyTorch's in-place ops.
  for (auto& g : groups_)
    for (size_t i = 0; i < g.params.size(); i++) {
      if (!g.params[i].grad().defined()) continue;
      for (auto* t : {&g.params[i], &g.m[i], &g.v[i]}) torch::autograd::impl::bump_version(*t);
    }
  for (const auto& w : written) copies_->updated(w.first, w.second);
}

// buf = momentum * buf + (grad + wd * p); p -= lr * buf, in one kernel over
// every tensor; a step with found_inf 1 changes nothing. The buffers start at
// zero, so the first step's buf = grad (torch's is_first_step) needs no flag.
void Optimizer::sgd_fused(Group& g, const torch::Tensor& found_inf,
                          const torch::Tensor& grad_scale) {
#if CS_HAS_FUSED_SGD
  std::vector<torch::Tensor> grads;
  grads.reserve(g.params.size());
  for (const auto& p : g.params) grads.push_back(p.grad());
  c10::optional<torch::Tensor> inf, scale;
  if (found_inf.defined()) inf = found_inf;
  if (grad_scale.defined()) scale = grad_scale;
  at::_fused_sgd_(g.params, grads, g.m, g.wd, o_.momentum, o_.lr, /*dampening=*/0.0,
                  /*nesterov=*/false, /*maximize=*/false, /*is_first_step=*/false, scale, inf);
#else
  (void)g, (void)found_inf, (void)grad_scale;
  throw UnsupportedError("fused SGD is not available in this libtorch");
#endif
}

void Optimizer::adamw_foreach(Group& g) {
  std::vector<torch::Tensor> grads;
  grads.reserve(g.params.size());
  for (const auto& p : g.params) grads.push_back(p.grad());
  const double bc1 = 1.0 - std::pow(o_.beta1, double(step_));
  const double bc2 = 1.0 - std::pow(o_.beta2, double(step_));
  if (g.wd != 0) at::_foreach_mul_(g.params, 1.0 - o_.lr * g.wd);
  at::_foreach_mul_(g.m, o_.beta1);
  at::_foreach_add_(g.m, grads, 1.0 - o_.beta1);
  at::_foreach_mul_(g.v, o_.beta2);
  at::_foreach_addcmul_(g.v, grads, grads, 1.0 - o_.beta2);
  auto denom = at::_foreach_sqrt(g.v);
  at::_foreach_div_(denom, std::sqrt(bc2));
  at::_foreach_add_(denom, o_.eps);
  at::_foreach_addcdiv_(g.params, g.m, denom, -o_.lr / bc1);
}

void Optimizer::sgd(Group& g, const torch::Tensor& found_inf) {
  // buf = momentum * buf + (grad + wd * p); p -= lr * buf. A skipped step leaves
  // buf and p unchanged: keep = 1 - found_inf masks both updates on the device.
  std::vector<torch::Tensor> grads;
  grads.reserve(g.params.size());
  for (const auto& p : g.params) grads.push_back(p.grad());
  if (found_inf.defined())
    for (auto& gr : grads) gr.nan_to_num_(0.0, 0.0, 0.0);
  if (g.wd != 0) at::_foreach_add_(grads, g.params, g.wd);
  if (!found_inf.defined()) {
    at::_foreach_mul_(g.m, o_.momentum);
    at::_foreach_add_(g.m, grads);
    at::_foreach_add_(g.params, g.m, -o_.lr);
    return;
  }
  auto keep = 1.0 - found_inf;
  compat::foreach_mul(grads, keep);
  compat::foreach_mul(g.m, 1.0 - keep * (1.0 - o_.momentum));
  at::_foreach_add_(g.m, grads);
  auto step = -o_.lr * keep;
  for (size_t i = 0; i < g.params.size(); i++) g.params[i].add_(g.m[i] * step);
}

torch::Tensor grad_sumsq(const std::vector<torch::Tensor>& grads, const torch::Device& device) {
  torch::NoGradGuard ng;
  if (grads.empty()) return torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(device));
  // Each tensor's norm is computed alone (the same kernel on the same values,
  // however the list is split); only the sum over tensors is float64.
  return torch::stack(at::_foreach_norm(grads, 2)).to(torch::kFloat64).square().sum();
}

ClipResult clip_grads(const std::vector<torch::Tensor>& grads, const torch::Tensor& sumsq,
                      const torch::Tensor& inv_scale, double max_norm, bool apply) {
  torch::NoGradGuard ng;
  auto total = sumsq.sqrt();  // of the scaled gradients, float64
  ClipResult r;
  r.found_inf = total.isfinite().logical_not().to(torch::kFloat32);
  auto norm = inv_scale.defined() ? total * inv_scale.to(torch::kFloat64) : total;
  auto coef = (max_norm / (norm + 1e-6)).clamp_max(1.0);
  if (inv_scale.defined()) coef = coef * inv_scale.to(torch::kFloat64);
  if (apply && !grads.empty()) compat::foreach_mul(grads, coef.to(torch::kFloat32));
  r.norm = norm.to(torch::kFloat32);
  r.coef = coef;
  return r;
}

ClipResult unscale_and_clip(const std::vector<torch::Tensor>& params,
                            const torch::Tensor& inv_scale, double max_norm, bool apply) {
  std::vector<torch::Tensor> grads;
  for (const auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) throw std::runtime_error("no parameter received a gradient");
  return clip_grads(grads, grad_sumsq(grads, grads[0].device()), inv_scale, max_norm, apply);
}

}  // namespace cs
