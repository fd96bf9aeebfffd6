// stem_conv.cpp: see stem_conv.h.
#include "stem_conv.h"

#include "compat.h"
#include "kernels.h"
#include "kernels_glue.h"

namespace cs {
namespace {

// The dtype the convolution of x runs in: autocast's on x's device, else x's.
at::ScalarType conv_dtype(const torch::Tensor& x) {
  const auto dev = x.device().type();
  return compat::autocast_enabled(dev) ? compat::autocast_dtype(dev) : x.scalar_type();
}

int64_t row_channels(at::ScalarType t) { return 16 / int64_t(c10::elementSize(t)); }

}  // namespace

bool stem_conv_padded(const torch::Tensor& x) {
  if (!kernels::enabled("stem") || !glue::runs_here(x) || x.dim() != 4) return false;
  if (!x.is_contiguous(at::MemoryFormat::ChannelsLast)) return false;
  const auto t = conv_dtype(x);
  if (t != torch::kBFloat16 && t != torch::kHalf && t != torch::kFloat32) return false;
  return x.size(1) < row_channels(t);
}

int64_t stem_conv_channels(const torch::Tensor& x) {
  return stem_conv_padded(x) ? row_channels(conv_dtype(x)) : x.size(1);
}

torch::Tensor stem_conv(const torch::Tensor& x, const torch::Tensor& weight, int64_t stride,
                        int64_t pad) {
  if (!stem_conv_padded(x)) return torch::conv2d(x, weight, {}, {stride, stride}, {pad, pad});
  const auto t = conv_dtype(x);
  const int64_t extra = row_channels(t) - x.size(1);
  const auto cl = at::MemoryFormat::ChannelsLast;
  // The input cast first (as autocast would) so that the pad writes 2-byte values.
  auto xp = at::constant_pad_nd(x.to(t), {0, 0, 0, 0, 0, extra}).contiguous(cl);
  auto wp = at::constant_pad_nd(weight, {0, 0, 0, 0, 0, extra}).contiguous(cl);
  return torch::conv2d(xp, wp, {}, {stride, stride}, {pad, pad});
}

}  // namespace cs
