// linear_casts.cpp: see linear_casts.h.
#include "linear_casts.h"

#include "compat.h"
#include "fp8_linear.h"
#include "kernels.h"
#include "kernels_glue.h"

namespace cs {
namespace {

thread_local LinearCasts* innermost = nullptr;

// Whether nothing but the LinearCopies entry refers to t: no view of its
// memory lives (storage), and no other handle of the tensor itself, which is
// how autograd keeps a saved input that is not an output of its function
// (SavedVariable: linear_act's weight until its backward has run). Called
// where no LinearCasts serves it (its claim, the optimizer's target).
bool sole(const torch::Tensor& t) { return t.storage().use_count() == 1 && t.use_count() == 1; }

}  // namespace

bool LinearCopies::holds(const Copy& c, const torch::Tensor& p) {
  return c.version >= 0 && c.version == p._version() && c.data == p.data_ptr() &&
         c.value.numel() == p.numel();
}

torch::Tensor LinearCopies::valid(const torch::Tensor& p, at::ScalarType dt) const {
  auto it = copies_.find(p.unsafeGetTensorImpl());
  if (it == copies_.end() || it->second.value.scalar_type() != dt || !holds(it->second, p)) return {};
  return it->second.value;
}

torch::Tensor LinearCopies::serve(const torch::Tensor& p, at::ScalarType dt) {
  auto c = valid(p, dt);
  if (c.defined()) copies_[p.unsafeGetTensorImpl()].served = true;
  return c;
}

bool LinearCopies::served_valid() const {
  for (const auto& kv : copies_)
    if (kv.second.served && !holds(kv.second, kv.second.source)) return false;
  return true;
}

void LinearCopies::clear_served() {
  for (auto& kv : copies_) kv.second.served = false;
}

void LinearCopies::invalidate_all() {
  for (auto& kv : copies_) kv.second.version = -1;
}

torch::Tensor LinearCopies::claim(const torch::Tensor& p, at::ScalarType dt) {
  Copy& c = copies_[p.unsafeGetTensorImpl()];
  if (!c.value.defined() || c.value.scalar_type() != dt || c.value.sizes() != p.sizes() ||
      c.value.device() != p.device() || !sole(c.value))
    c.value = torch::empty(p.sizes(), p.options().dtype(dt));
  c.source = p;
  c.served = false;  // cast from here on
  c.version = p._version();
  c.data = p.data_ptr();
  return c.value;
}

LinearCopies::Target LinearCopies::target(const torch::Tensor& p) const {
  Target t;
  auto it = copies_.find(p.unsafeGetTensorImpl());
  if (it == copies_.end()) return t;
  const Copy& c = it->second;
  const auto dt = c.value.scalar_type();
  // Laid out as p (contiguous, as claim made it), and held by nothing else:
  // a forward whose backward has not run would see its saved weight change.
  if (c.value.sizes() != p.sizes() || !p.is_contiguous() || c.value.device() != p.device() ||
      (dt != torch::kBFloat16 && dt != torch::kHalf) || !sole(c.value))
    return t;
  t.writes = true;
  t.dst = c.value.data_ptr();
  t.dt = dt == torch::kBFloat16 ? kern::DType::BF16 : kern::DType::F16;
  t.valid = holds(c, p);
  return t;
}

void LinearCopies::updated(const torch::Tensor& p, bool was_valid) {
  auto it = copies_.find(p.unsafeGetTensorImpl());
  if (it == copies_.end()) return;
  Copy& c = it->second;
  c.version = was_valid ? p._version() : -1;
  c.data = p.data_ptr();
}

size_t LinearCopies::valid_count() const {
  size_t n = 0;
  for (const auto& kv : copies_) n += holds(kv.second, kv.second.source) ? 1 : 0;
  return n;
}

LinearCasts::LinearCasts(const std::vector<torch::Tensor>& params, LinearCopies* keep)
    : outer_(innermost) {
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
  if (!kernels::enabled("adamc")) keep = nullptr;
  std::vector<kern::CastJob> jobs;
  for (const auto& p : params) {
    if (p.device() != first.device() || p.scalar_type() != torch::kFloat32 || !p.is_contiguous())
      continue;  // linear_act casts it itself
    torch::Tensor c = keep ? keep->serve(p, dt) : torch::Tensor();
    if (!c.defined()) {
      c = keep ? keep->claim(p, dt) : torch::empty(p.sizes(), p.options().dtype(dt));
      jobs.push_back({p.data_ptr<float>(), c.data_ptr(), p.numel()});
    }
    casts_[p.unsafeGetTensorImpl()] = {c, p._version()};
  }
  cast_count_ = jobs.size();
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
