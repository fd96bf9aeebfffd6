// stem_conv.cpp: see stem_conv.h.
#include "stem_conv.h"

#include "compat.h"
#include "kernels.h"
#include "kernels_glue.h"

namespace cs {
namespace {

// kw' of stem_conv_k.
int64_t widened_kw(int64_t k, int64_t C, int64_t elem_bytes) {
  int64_t kw = k;
  while ((k * kw * C * elem_bytes) % 16 != 0) kw++;
  return kw;
}

}  // namespace

int64_t stem_conv_k(int64_t k, int64_t C, int64_t elem_bytes) {
  return k * widened_kw(k, C, elem_bytes) * C;
}

bool stem_conv_as_gemm(const torch::Tensor& x, const torch::Tensor& weight) {
  if (!kernels::enabled("stem") || !glue::runs_here(x) || x.dim() != 4 || weight.dim() != 4) return false;
  if (!x.is_contiguous(at::MemoryFormat::ChannelsLast) || x.requires_grad()) return false;
  if (weight.size(1) != x.size(1) || weight.size(2) != weight.size(3)) return false;
  const auto t = compat::compute_dtype(x);
  return t == torch::kBFloat16 || t == torch::kHalf || t == torch::kFloat32;
}

torch::Tensor stem_conv_rows(const torch::Tensor& x, int64_t k, int64_t stride, int64_t pad,
                             at::ScalarType t, bool gather_kernel) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t kw = widened_kw(k, C, int64_t(c10::elementSize(t)));
  const int64_t Ho = (H + 2 * pad - k) / stride + 1, Wo = (W + 2 * pad - k) / stride + 1;
  if (gather_kernel) {
    TORCH_CHECK(glue::runs_here(x) && glue::has_dtype(x.scalar_type()) && glue::has_dtype(t) &&
                    x.is_contiguous(at::MemoryFormat::ChannelsLast),
                "stem_conv_rows: the gather kernel takes a channels_last fp32, bf16 or fp16 tensor where it runs");
    auto rows = torch::empty({N * Ho * Wo, k * kw * C}, x.options().dtype(t));
    CS_KERNEL(x, "stem rows gather kernel", stem_rows, x.data_ptr(), rows.data_ptr(),
              glue::dtype(x.scalar_type()), glue::dtype(t), N, H, W, C, Ho, Wo, k, kw, stride, pad);
    return rows;
  }
  // Zero borders (and the widened windows' extra columns on the right), in
  // the product's dtype; NHWC memory.
  const int64_t right = std::max<int64_t>(pad, (Wo - 1) * stride + kw - W - pad);
  auto xp = at::constant_pad_nd(x.to(t), {pad, right, pad, pad}).contiguous(at::MemoryFormat::ChannelsLast);
  const int64_t Hp = xp.size(2), Wp = xp.size(3);
  // [N, Ho, Wo, k, kw, C] windows over xp's NHWC memory, gathered into rows.
  return xp.as_strided({N, Ho, Wo, k, kw, C}, {Hp * Wp * C, stride * Wp * C, stride * C, Wp * C, C, 1})
      .reshape({N * Ho * Wo, k * kw * C});
}

torch::Tensor stem_conv(const torch::Tensor& x, const torch::Tensor& weight, int64_t stride,
                        int64_t pad) {
  if (!stem_conv_as_gemm(x, weight)) return torch::conv2d(x, weight, {}, {stride, stride}, {pad, pad});
  const auto t = compat::compute_dtype(x);
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t cout = weight.size(0), k = weight.size(2);
  const int64_t kw = widened_kw(k, C, int64_t(c10::elementSize(t)));
  const int64_t Ho = (H + 2 * pad - k) / stride + 1, Wo = (W + 2 * pad - k) / stride + 1;
  // The input's windows as rows: the engine's gather kernel where it takes
  // the input, else libtorch's padding and strided copy (the same values).
  const bool gather = glue::has_dtype(x.scalar_type()) && CS_KERNEL_FACT(x, stem_rows_supports, k * kw * C);
  auto rows = stem_conv_rows(x, k, stride, pad, t, gather);
  // The weight as [K, cout] in the rows' (kh, kw, c) order, zero in the widened columns.
  auto w = at::constant_pad_nd(weight.permute({2, 3, 1, 0}), {0, 0, 0, 0, 0, kw - k})
               .reshape({k * kw * C, cout});
  auto y = at::mm(rows, w);  // [N Ho Wo, cout]: the output in NHWC memory
  return y.view({N, Ho, Wo, cout}).permute({0, 3, 1, 2});
}

}  // namespace cs
