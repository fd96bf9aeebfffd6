// stem_conv.h: ResNet's first convolution over input channels padded with zero
// channels to a 16-byte row (kernels.h "stem"): 8 channels where the
// convolution runs in bf16 or fp16, 4 in fp32. Over 3 channels in
// channels_last, cuDNN has no 16-byte-aligned tensor-core kernel; in a kernel
// profile of ResNet-50 at 256 x 224 in bf16 on the H200 (b6edacd) two
// convolution kernels that run once a step took 1.5 ms (forward) and 0.9 ms
// (weight gradient) of a 39.7 ms step, and fp16's step spent 1.9 ms less on
// convolutions. The zero channels add exactly nothing to the output and their
// weights get no gradient; the parameter stays [cout, 3, k, k].
#pragma once

#include <torch/torch.h>

namespace cs {

// conv2d(x, weight, no bias, stride, pad), x [N, C, H, W], weight [cout, C, k, k].
torch::Tensor stem_conv(const torch::Tensor& x, const torch::Tensor& weight, int64_t stride,
                        int64_t pad);

// Whether stem_conv pads: the "stem" kernel switched on, x a CUDA tensor (or a
// CPU one under kernels::set_host_for_tests) in channels_last with fewer
// channels than a 16-byte row of the dtype the convolution runs in.
bool stem_conv_padded(const torch::Tensor& x);

// The channel count stem_conv pads x to (x's own when it does not pad).
int64_t stem_conv_channels(const torch::Tensor& x);

}  // namespace cs
