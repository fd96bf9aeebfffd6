// linear_casts.cpp: see linear_casts.h.
#include "linear_casts.h"

#include "compat.h"
#include "fp8_linear.h"
#include "kernels.h"
#include "kernels_glue.h"

namespace cs {
namespace {

thread_local LinearCasts* innermost = nullptr;

}  // namespace

LinearCasts::LinearCasts(const std::vector<torch::Tensor>& params) : outer_(innermost) {
  innermost = this;
  if (params.empty() || !kernels::enabled("cast")) return;
  const auto& first = params.front();
  const auto dev = first.device().type();
  if (!glue::runs_here(first) || !compat::autocast_enabled(dev)) return;
  // precision fp8: the weights go to FP8 from fp32 (fp8_linear.h), not through bf16.
  if (fp8::on() && first.is_cuda()) return;
  const auto dt = compat::autocast_dtype(dev);
  if (dt != torch::kBFloat16 && dt != torch::kHalf) return;
  torch::NoGradGuard no_grad;
  std::vector<kern::CastJob> jobs;
  for (const auto& p : params) {
    if (p.device() != first.device() || p.scalar_type() != torch::kFloat32 || !p.is_contiguous())
      continue;  // linear_act casts it itself
    auto c = torch::empty(p.sizes(), p.options().dtype(dt));
    jobs.push_back({p.data_ptr<float>(), c.data_ptr(), p.numel()});
    casts_[p.unsafeGetTensorImpl()] = {c, p._version()};
  }
  if (jobs.empty()) return;
  CS_KERNEL(first, "linear layers' weight cast kernel", cast_f32_many, jobs.data(),
            int(jobs.size()), glue::dtype(dt));
}

LinearCasts::~LinearCasts() { innermost = outer_; }

torch::Tensor LinearCasts::cast(const torch::Tensor& t, at::ScalarType dt) {
  for (LinearCasts* lc = innermost; lc; lc = lc->outer_) {
    auto it = lc->casts_.find(t.unsafeGetTensorImpl());
    if (it == lc->casts_.end()) continue;
    if (it->second.value.scalar_type() == dt && it->second.version == t._version()) {
      lc->served_++;
      return it->second.value;
    }
    break;
  }
  return t.to(dt);
}

}  // namespace cs
