// stem_conv.h: ResNet's first convolution (7x7, stride 2, over the 3 image
// channels) as one matrix product (kernels.h "stem"): the input's windows
// gathered into rows (im2col, each window's kh x kw' x C values with kw'
// widened past kw by zero-weight columns until a row is a multiple of 16
// bytes) times the weight as a [K, cout] matrix. The output rows are the
// output pixels, so the product is the channels_last output itself. The rows
// come from a gather kernel of the engine's own (cuda/stem_rows.cu).
//
// Why: over 3 input channels cuDNN has no efficient kernel. In a kernel
// profile of ResNet-50 at 256 x 224 in bf16 on the H200 (c4c23e2) its stem
// forward ran at ~13 TFLOP/s (1.56 ms; 1.72 ms with the channels padded to 8)
// and its weight gradient took 0.9 ms, 7% of a 37.7 ms step; the product
// here is 66 GFLOP on tensor cores plus ~1.1 GB of gathered rows written and
// read. The rows are kept for the backward (the weight gradient is one more
// product); the input gets no gradient (images).
#pragma once

#include <torch/torch.h>

namespace cs {

// conv2d(x, weight, no bias, stride, pad), x [N, C, H, W], weight [cout, C, k, k].
torch::Tensor stem_conv(const torch::Tensor& x, const torch::Tensor& weight, int64_t stride,
                        int64_t pad);

// The rows of stem_conv's product, [N Ho Wo, K] in dtype t (K =
// stem_conv_k): through the engine's gather kernel (gather_kernel: a
// channels_last x where the kernels run, K a multiple of 8), which reads the
// image once and writes each row in 16-byte stores, or through libtorch's
// cast, zero padding and strided copy. Both give the same values; stem_conv
// takes the kernel where it can.
torch::Tensor stem_conv_rows(const torch::Tensor& x, int64_t k, int64_t stride, int64_t pad,
                             at::ScalarType t, bool gather_kernel);

// Whether stem_conv runs as a matrix product: the "stem" kernel switched on,
// x a CUDA tensor (or a CPU one under kernels::set_host_for_tests) in
// channels_last that needs no gradient, a square kernel.
bool stem_conv_as_gemm(const torch::Tensor& x, const torch::Tensor& weight);

// The product's K for a k x k kernel over C channels in a dtype of elem_bytes
// bytes: k * kw' * C with the smallest kw' >= k that makes it a multiple of
// 16 bytes (168 for ResNet's 7 x 7 x 3 in bf16 or fp32).
int64_t stem_conv_k(int64_t k, int64_t C, int64_t elem_bytes);

}  // namespace cs
