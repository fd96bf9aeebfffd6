// stem_rows.cu: the rows of ResNet's stem as a matrix product (stem_conv.h):
// each output pixel's input window gathered into one row, read straight from
// the image (any of fp32, bf16, fp16) with the zero padding and the cast to
// the product's dtype done as it is read. libtorch's way takes three passes
// (the cast, the padding, and a generic strided copy of one element per
// thread, 1.76 ms a step at ResNet-50's 256 x 224 on the H200); here one pass
// writes 16 bytes per thread. Each thread owns V = 8 consecutive columns of
// a row.
#include "common.cuh"

namespace cs {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kV = 8;

struct Geom {
  int N, H, W, C, Ho, Wo, k, kw, s, p;
};

// Block (L, R): threadIdx.x the 8-column group of a row (L = K / 8 of them),
// threadIdx.y one of R rows; the blocks stride over the rows. A thread's
// place in the window is fixed, so the only divisions are a row's (n, ho, wo).
template <typename TX, typename T>
__global__ void __launch_bounds__(kThreads)
    stem_rows_kernel(const TX* __restrict__ x, T* __restrict__ rows, Geom g, int total_rows) {
  const int span = g.kw * g.C;  // one window row's values: kw pixels of C channels
  const int K = g.k * span, col0 = int(threadIdx.x) * kV;
  const int kh0 = col0 / span, dw0 = col0 % span / g.C, c0 = col0 % g.C;
  for (int row = int(blockIdx.x * blockDim.y + threadIdx.y); row < total_rows;
       row += int(gridDim.x * blockDim.y)) {
    const int wo = row % g.Wo, nh = row / g.Wo, ho = nh % g.Ho, n = nh / g.Ho;
    const int h0 = ho * g.s - g.p, w0 = wo * g.s - g.p;
    int kh = kh0, dw = dw0, c = c0;
    float v[kV];
#pragma unroll
    for (int e = 0; e < kV; e++) {
      const int h = h0 + kh, w = w0 + dw;
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
    store_f<T, kV>(rows + int64_t(row) * K + col0, v);
  }
}

}  // namespace

bool stem_rows_supports(int64_t K) { return K > 0 && K % kV == 0 && K / kV <= kThreads; }

cudaError_t stem_rows(const void* x, void* rows, DType tx, DType t, int64_t N, int64_t H, int64_t W,
                      int64_t C, int64_t Ho, int64_t Wo, int64_t k, int64_t kw, int64_t s,
                      int64_t p, cudaStream_t stream) {
  const int64_t K = k * kw * C, elem = t == DType::F32 ? 4 : 2, total = N * Ho * Wo;
  if (!stem_rows_supports(K) || kw < k || s < 1 || p < 0 || !aligned(rows, kV * elem))
    return cudaErrorInvalidValue;
  for (int64_t d : {N, H, W, C, Ho, Wo, K, total})
    if (d > INT32_MAX) return cudaErrorInvalidValue;
  if (total == 0) return cudaSuccess;
  const Geom g{int(N), int(H), int(W), int(C), int(Ho), int(Wo), int(k), int(kw), int(s), int(p)};
  const int L = int(K / kV), R = kThreads / L;
  const dim3 block(L, R);
  CS_DISPATCH(tx, TX, CS_DISPATCH(t, T, constexpr auto kernel = stem_rows_kernel<TX, T>;
                                  kernel<<<grid_stride_blocks<kernel>(total * L, L * R), block, 0, stream>>>(
                                      static_cast<const TX*>(x), static_cast<T*>(rows), g, int(total))));
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace cs
