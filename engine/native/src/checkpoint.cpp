// checkpoint.cpp: activation checkpointing. The forward runs without building an
// autograd graph (its activations are freed); backward re-runs it with grad
// enabled and backpropagates through the recomputed graph (reentrant, like
// torch.utils.checkpoint with use_reentrant=True). The autocast state of the
// forward is restored for the recomputation, which may run on another thread.
// The recomputation runs under RecomputeScope (recompute.h): BatchNorm puts
// back the running statistics its second pass in the step would update again.
#include <torch/torch.h>

#include "compat.h"
#include "model.h"
#include "recompute.h"

namespace cs {
namespace {

thread_local bool t_recomputing = false;

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using Fn = std::function<torch::Tensor(const torch::Tensor&)>;

struct FnHolder : torch::CustomClassHolder {
  explicit FnHolder(Fn f) : fn(std::move(f)) {}
  Fn fn;
};

struct AutocastState {
  bool cpu, cuda;
  at::ScalarType cpu_dtype, cuda_dtype;
  static AutocastState now() {
    return {compat::autocast_enabled(c10::DeviceType::CPU),
            compat::autocast_enabled(c10::DeviceType::CUDA),
            compat::autocast_dtype(c10::DeviceType::CPU),
            compat::autocast_dtype(c10::DeviceType::CUDA)};
  }
  void apply() const {
    compat::set_autocast(c10::DeviceType::CPU, cpu, cpu_dtype);
    compat::set_autocast(c10::DeviceType::CUDA, cuda, cuda_dtype);
  }
};

struct Checkpoint : torch::autograd::Function<Checkpoint> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, Fn fn) {
    auto s = AutocastState::now();
    ctx->saved_data["fn"] = c10::IValue::make_capsule(c10::make_intrusive<FnHolder>(fn));
    ctx->saved_data["ac_cpu"] = s.cpu;
    ctx->saved_data["ac_cuda"] = s.cuda;
    ctx->saved_data["ac_cpu_dtype"] = int64_t(s.cpu_dtype);
    ctx->saved_data["ac_cuda_dtype"] = int64_t(s.cuda_dtype);
    ctx->save_for_backward({x});
    torch::NoGradGuard ng;
    return fn(x);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    auto x = ctx->get_saved_variables()[0];
    auto holder = ctx->saved_data["fn"].toCapsule();
    const Fn& fn = static_cast<FnHolder*>(holder.get())->fn;
    AutocastState forward_state{
        ctx->saved_data["ac_cpu"].toBool(), ctx->saved_data["ac_cuda"].toBool(),
        at::ScalarType(ctx->saved_data["ac_cpu_dtype"].toInt()),
        at::ScalarType(ctx->saved_data["ac_cuda_dtype"].toInt())};
    auto here = AutocastState::now();
    auto xd = x.detach().requires_grad_(x.requires_grad());
    torch::Tensor y;
    {
      torch::AutoGradMode grad_on(true);
      forward_state.apply();
      try {
        RecomputeScope recompute;
        y = fn(xd);
      } catch (...) {
        here.apply();
        throw;
      }
      here.apply();
      if (forward_state.cpu || forward_state.cuda) at::autocast::clear_cache();
    }
    torch::autograd::backward({y}, {grad_out[0]});
    return {xd.grad(), torch::Tensor()};
  }
};

}  // namespace

bool recomputing() { return t_recomputing; }
RecomputeScope::RecomputeScope() : outer_(t_recomputing) { t_recomputing = true; }
RecomputeScope::~RecomputeScope() { t_recomputing = outer_; }

torch::Tensor checkpoint(const Fn& fn, const torch::Tensor& x) {
  return Checkpoint::apply(x, fn);
}

}  // namespace cs
