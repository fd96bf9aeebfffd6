// max_pool.cpp: see max_pool.h.
#include "max_pool.h"

#include "kernels.h"
#include "kernels_glue.h"

namespace cs {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

int64_t out_size(int64_t n, int64_t k, int64_t s, int64_t p) { return (n + 2 * p - k) / s + 1; }

// The "pool" kernels (CUDA, or their host versions in the tests).
struct MaxPool : torch::autograd::Function<MaxPool> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, int64_t k, int64_t s,
                               int64_t p) {
    const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    const int64_t Ho = out_size(H, k, s, p), Wo = out_size(W, k, s, p);
    auto y = torch::empty({N, C, Ho, Wo}, x.options().memory_format(at::MemoryFormat::ChannelsLast));
    auto arg = torch::empty({N * Ho * Wo * C}, x.options().dtype(torch::kUInt8));
    CS_KERNEL(x, "max pool forward kernel", max_pool_fwd, x.data_ptr(), y.data_ptr(),
              arg.data_ptr<uint8_t>(), glue::dtype(x.scalar_type()), N, H, W, C, Ho, Wo, k, s, p);
    ctx->save_for_backward({arg});
    ctx->saved_data["shape"] = std::vector<int64_t>{N, C, H, W, Ho, Wo, k, s, p};
    ctx->saved_data["dtype"] = int64_t(x.scalar_type());
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto arg = ctx->get_saved_variables()[0];
    const auto v = ctx->saved_data["shape"].toIntVector();
    const int64_t N = v[0], C = v[1], H = v[2], W = v[3], Ho = v[4], Wo = v[5], k = v[6], s = v[7],
                  p = v[8];
    const auto dt = at::ScalarType(ctx->saved_data["dtype"].toInt());
    auto dy = grads[0].to(dt).contiguous(at::MemoryFormat::ChannelsLast);
    if (reinterpret_cast<uintptr_t>(dy.data_ptr()) % 16) dy = dy.clone(at::MemoryFormat::ChannelsLast);
    auto dx = torch::empty({N, C, H, W}, dy.options().memory_format(at::MemoryFormat::ChannelsLast));
    CS_KERNEL(dy, "max pool backward kernel", max_pool_bwd, dy.data_ptr(), arg.data_ptr<uint8_t>(),
              dx.data_ptr(), glue::dtype(dt), N, H, W, C, Ho, Wo, k, s, p);
    return {dx, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

bool max_pool_fused(const torch::Tensor& x, int64_t k, int64_t s, int64_t p) {
  if (!kernels::enabled("pool") || !glue::runs_here(x) || x.dim() != 4 || x.numel() == 0)
    return false;
  if (x.scalar_type() != torch::kBFloat16 && x.scalar_type() != torch::kHalf) return false;
  if (!x.is_contiguous(at::MemoryFormat::ChannelsLast) ||
      reinterpret_cast<uintptr_t>(x.data_ptr()) % 16)
    return false;
  return CS_KERNEL_FACT(x, max_pool_supports, x.size(1), k, s, p) && x.size(2) + 2 * p >= k &&
         x.size(3) + 2 * p >= k;
}

torch::Tensor max_pool(const torch::Tensor& x, int64_t k, int64_t s, int64_t p) {
  if (max_pool_fused(x, k, s, p)) return MaxPool::apply(x, k, s, p);
  return torch::max_pool2d(x, k, s, p);
}

}  // namespace cs
