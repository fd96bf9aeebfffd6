// linear_ce.cpp: see linear_ce.h.
#include "linear_ce.h"

#include <algorithm>
#include <limits>

#include "compat.h"
#include "kernels.h"
#include "kernels_glue.h"

namespace cs {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr int64_t kPadTo = 64;               // vocabulary padding for the matmuls
constexpr int64_t kChunkLogits = 8 << 20;    // fp32 logits per chunk: 32 MB

int64_t padded(int64_t v) { return (v + kPadTo - 1) / kPadTo * kPadTo; }

// Log-softmax over dim 1 in fp32 from logits of any float dtype. Only CUDA's
// fp16 kernel reads half and writes float in one pass (half_to_float); bf16
// and the CPU convert the chunk first.
torch::Tensor log_softmax_f32(const torch::Tensor& z) {
  if (z.is_cuda() && z.scalar_type() == torch::kHalf) return at::_log_softmax(z, 1, true);
  return at::_log_softmax(z.to(torch::kFloat32), 1, false);
}

struct LinearCrossEntropy : torch::autograd::Function<LinearCrossEntropy> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& h,
                               const torch::Tensor& weight, const torch::Tensor& bias,
                               const torch::Tensor& target, int64_t chunk_rows) {
    // The products' dtype, read before the guards: with autocast's dispatch
    // keys excluded autocast reads as off (fp32 products for BERT's fp32 input).
    const auto dt = compat::compute_dtype(h);
    // Every dtype below is chosen here, not by autocast's per-op rules.
    c10::impl::ExcludeDispatchKeyGuard no_cpu(c10::DispatchKey::AutocastCPU);
    c10::impl::ExcludeDispatchKeyGuard no_cuda(c10::DispatchKey::AutocastCUDA);
    const int64_t N = h.size(0), V = weight.size(0), Vp = padded(V);
    auto hc = h.to(dt);
    // [Vp, d]: the weight cast straight into the padded copy (one pass over it,
    // not a cast and then a pad), zero rows after V.
    auto wc = torch::empty({Vp, weight.size(1)}, weight.options().dtype(dt));
    wc.narrow(0, 0, V).copy_(weight);
    if (Vp > V) wc.narrow(0, V, Vp - V).zero_();
    torch::Tensor z;  // [N, Vp]
    if (has(bias)) {
      // The bias padded with zeros, added in the product's epilogue.
      auto bc = torch::zeros({Vp}, bias.options().dtype(dt));
      bc.narrow(0, 0, V).copy_(bias);
      z = torch::addmm(bc, hc, wc.t());
    } else {
      z = torch::mm(hc, wc.t());
    }
    auto losses = torch::empty({N}, h.options().dtype(torch::kFloat32));
    if (fused_kernel(z)) {
      // One pass per row over the logits (kernels.h "ce"); padding columns become 0.
      auto t = target.to(torch::kInt64).contiguous();
      CS_KERNEL(z, "cross-entropy kernel", cross_entropy_fwd_grad, z.data_ptr(),
                glue::dtype(z.scalar_type()), N, Vp, V, t.data_ptr<int64_t>(),
                losses.data_ptr<float>());
      save(ctx, h, weight, bias, hc, wc, z, V);
      return losses.mean();
    }
    if (Vp > V) z.narrow(1, V, Vp - V).fill_(-std::numeric_limits<double>::infinity());

    const int64_t rows = chunk_rows > 0 ? chunk_rows : std::max<int64_t>(1, kChunkLogits / Vp);
    for (int64_t r = 0; r < N; r += rows) {
      const int64_t n = std::min(rows, N - r);
      auto zc = z.narrow(0, r, n);
      auto idx = target.narrow(0, r, n).unsqueeze(1);
      auto lp = log_softmax_f32(zc);
      losses.narrow(0, r, n).copy_(lp.gather(1, idx).squeeze(1).neg());
      // d (sum of the chunk's losses) / d logits = softmax - one-hot.
      lp.exp_().scatter_add_(1, idx, torch::full({n, 1}, -1.0, lp.options()));
      zc.copy_(lp);
    }
    save(ctx, h, weight, bias, hc, wc, z, V);
    return losses.mean();
  }

  // Whether a bias was given: none is an empty tensor (V > 0).
  static bool has(const torch::Tensor& bias) { return bias.numel() > 0; }

  // Whether the "ce" kernel computes the loss and its gradient over z.
  static bool fused_kernel(const torch::Tensor& z) {
    return kernels::enabled("ce") && glue::runs_here(z) && glue::has_dtype(z.scalar_type()) &&
           z.is_contiguous() && z.size(0) <= std::numeric_limits<int32_t>::max();
  }

  static void save(AutogradContext* ctx, const torch::Tensor& h, const torch::Tensor& weight,
                   const torch::Tensor& bias, const torch::Tensor& hc, const torch::Tensor& wc,
                   const torch::Tensor& z, int64_t V) {
    ctx->save_for_backward({hc, wc, z});
    ctx->saved_data["vocab"] = V;
    ctx->saved_data["b_dtype"] = int64_t(bias.scalar_type());
    ctx->saved_data["has_bias"] = has(bias);
    ctx->saved_data["h_dtype"] = int64_t(h.scalar_type());
    ctx->saved_data["w_dtype"] = int64_t(weight.scalar_type());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    auto saved = ctx->get_saved_variables();
    auto hc = saved[0], wc = saved[1], z = saved[2];
    const int64_t V = ctx->saved_data["vocab"].toInt();
    const auto h_dtype = at::ScalarType(ctx->saved_data["h_dtype"].toInt());
    const auto w_dtype = at::ScalarType(ctx->saved_data["w_dtype"].toInt());
    const auto b_dtype = at::ScalarType(ctx->saved_data["b_dtype"].toInt());
    const bool has_bias = ctx->saved_data["has_bias"].toBool();
    // d loss / d logits = grad_out / N * z (the mean's 1/N and, in fp16, the
    // loss scale are in grad_out).
    auto g = grad_out[0].to(torch::kFloat32) / double(z.size(0));
    torch::Tensor gh, gw, gb;  // gb: the padding columns of z are 0, dropped
    if (z.scalar_type() == torch::kHalf) {
      // fp16: scale before the matmuls, so that an overflow shows as inf in the
      // gradients and the loss scaler backs off, as with the plain head.
      z.mul_(g.to(z.scalar_type()));
      gh = torch::mm(z, wc).to(h_dtype);
      gw = torch::mm(z.t(), hc).narrow(0, 0, V).to(w_dtype);
      if (has_bias) gb = z.sum(0, false, torch::kFloat32).narrow(0, 0, V).to(b_dtype);
    } else {
      // g scales h (N x d) before the weight's matmul rather than its fp32
      // result (V x d: six times h's bytes in GPT-2's head); exact when g is
      // a power of two (a mean over 2^k tokens).
      gh = torch::mm(z, wc).to(h_dtype).mul_(g);
      gw = compat::mm_to(z.t(), hc * g, w_dtype).narrow(0, 0, V);
      if (has_bias) gb = (z.sum(0, false, torch::kFloat32) * g).narrow(0, 0, V).to(b_dtype);
    }
    return {gh, gw, gb, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor linear_cross_entropy(const torch::Tensor& h, const torch::Tensor& weight,
                                   const torch::Tensor& target, int64_t chunk_rows,
                                   const torch::Tensor& bias) {
  // An undefined tensor cannot be an autograd function's input (torch 1.13): no
  // bias is an empty one.
  const auto b = bias.defined() ? bias : torch::empty({0}, weight.options());
  return LinearCrossEntropy::apply(h, weight, b, target, chunk_rows);
}

}  // namespace cs
