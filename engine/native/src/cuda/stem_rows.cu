// stem_rows.cu: the rows of ResNet's stem as a matrix product (stem_conv.h):
// each output pixel's input window gathered into one row, read straight from
// the image (any of fp32, bf16, fp16) with the zero padding and the cast to
// the product's dtype done as it is read. libtorch's way takes three passes
// (the cast, the padding, and a generic strided copy of one element per
// thread, 1.76 ms a step at ResNet-50's 256 x 224 on the H200); here one pass
// writes 16 bytes per thread. Each thread owns V = 8 consecutive columns of
// one row.
#include "common.cuh"

namespace cs {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kV = 8;

struct Geom {
  int N, H, W, C, Ho, Wo, k, kw, s, p;
};

template <typename TX, typename T>
__global__ void __launch_bounds__(kThreads)
    stem_rows_kernel(const TX* __restrict__ x, T* __restrict__ rows, Geom g) {
  const int span = g.kw * g.C;  // one window row's values: kw pixels of C channels
  const int K = g.k * span, L = K / kV;
  const int64_t total = int64_t(g.N) * g.Ho * g.Wo * L;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * kThreads) {
    const int64_t row = i / L;
    const int col0 = int(i % L) * kV;
    const int wo = int(row % g.Wo), ho = int((row / g.Wo) % g.Ho), n = int(row / (int64_t(g.Wo) * g.Ho));
    // The first column's place in the window (kh, dw, c), then stepped.
    int kh = col0 / span, j = col0 % span;
    int dw = j / g.C, c = j % g.C;
    float v[kV];
#pragma unroll
    for (int e = 0; e < kV; e++) {
      const int h = ho * g.s - g.p + kh, w = wo * g.s - g.p + dw;
      v[e] = h >= 0 && h < g.H && w >= 0 && w < g.W
                 ? to_f<TX>(x[((int64_t(n) * g.H + h) * g.W + w) * g.C + c])
                 : 0.f;  // rounded to T once, by the store
      if (++c == g.C) {
        c = 0;
        if (++dw == g.kw) {
          dw = 0;
          kh++;
        }
      }
    }
    store_f<T, kV>(rows + row * K + col0, v);
  }
}

}  // namespace

bool stem_rows_supports(int64_t K) { return K > 0 && K % kV == 0; }

cudaError_t stem_rows(const void* x, void* rows, DType tx, DType t, int64_t N, int64_t H, int64_t W,
                      int64_t C, int64_t Ho, int64_t Wo, int64_t k, int64_t kw, int64_t s,
                      int64_t p, cudaStream_t stream) {
  const int64_t K = k * kw * C, elem = t == DType::F32 ? 4 : 2;
  if (!stem_rows_supports(K) || kw < k || s < 1 || p < 0 || !aligned(rows, kV * elem))
    return cudaErrorInvalidValue;
  for (int64_t d : {N, H, W, C, Ho, Wo, K})
    if (d > INT32_MAX) return cudaErrorInvalidValue;
  const Geom g{int(N), int(H), int(W), int(C), int(Ho), int(Wo), int(k), int(kw), int(s), int(p)};
  const unsigned grid = grid_stride_blocks(N * Ho * Wo * (K / kV), kThreads);
  CS_DISPATCH(tx, TX, CS_DISPATCH(t, T, stem_rows_kernel<TX, T><<<grid, kThreads, 0, stream>>>(
                                            static_cast<const TX*>(x), static_cast<T*>(rows), g)));
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace cs
