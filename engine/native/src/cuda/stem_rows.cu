// stem_rows.cu: the rows of ResNet's stem as a matrix product (stem_conv.h):
// each output pixel's input window gathered into one row, read straight from
// the image (any of fp32, bf16, fp16) with the zero padding and the cast to
// the product's dtype done as it is read. libtorch's way takes three passes
// (the cast, the padding, and a generic strided copy of one element per
// thread, 1.76 ms a step at ResNet-50's 256 x 224 on the H200); here one pass
// writes 16 bytes per thread. Each thread owns V = 8 consecutive columns of
// a row. Where the image rows a tile of output pixels reads fit in 48 KB
// (ResNet's: 7 rows x 30 pixels x 3 channels for 12 outputs), a block first
// copies them into shared memory with coalesced loads (direct reads scatter a
// warp's load over ~25 sectors), then gathers its rows from there.
#include "common.cuh"

namespace cs {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kV = 8;

struct Geom {
  int N, H, W, C, Ho, Wo, k, kw, s, p;
};

constexpr int64_t kTileBytesMax = 48 * 1024;  // without opting in to more

// Image values a tile of P output pixels along a row reads: k rows of
// (P - 1) s + kw pixels.
int64_t tile_values(const Geom& g, int P) { return int64_t(g.k) * ((int64_t(P) - 1) * g.s + g.kw) * g.C; }

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

// Block (L, P) as stem_rows_kernel's, its P rows the consecutive output
// pixels wo = t P + j of one image row (n, ho): per tile, the image values
// those pixels' windows read, tile [kh][column][c] (zero outside the image),
// are copied into shared memory, then each thread gathers its 8 values.
template <typename TX, typename T>
__global__ void __launch_bounds__(kThreads)
    stem_rows_tiled_kernel(const TX* __restrict__ x, T* __restrict__ rows, Geom g, int tiles) {
  extern __shared__ float tile[];
  const int P = blockDim.y, tw = (P - 1) * g.s + g.kw, pitch = tw * g.C;  // pitch: one kh's values
  const int span = g.kw * g.C, K = g.k * span, col0 = int(threadIdx.x) * kV;
  const int tid = threadIdx.y * blockDim.x + threadIdx.x, nthreads = blockDim.x * P;
  const int per_row = (g.Wo + P - 1) / P, values = g.k * pitch;
  // This thread's 8 values in the tile, from its first pixel's window.
  int off[kV];
#pragma unroll
  for (int e = 0; e < kV; e++) {
    const int col = col0 + e, kh = col / span;
    off[e] = kh * pitch + (col - kh * span) + int(threadIdx.y) * g.s * g.C;
  }
  for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int nh = t / per_row, wo0 = (t - nh * per_row) * P, ho = nh % g.Ho, n = nh / g.Ho;
    const int h0 = ho * g.s - g.p, w0 = wo0 * g.s - g.p;
    // A tile row's value v (column w0 + v / C) lies in the image for lo <= v < hi.
    const int lo = (w0 < 0 ? -w0 : 0) * g.C, hi = (g.W - w0) * g.C;
    __syncthreads();  // the previous tile's reads are done
#pragma unroll 2
    for (int i = tid; i < values; i += nthreads) {
      const int kh = i / pitch, v = i - kh * pitch, h = h0 + kh;
      tile[i] = h >= 0 && h < g.H && v >= lo && v < hi
                    ? to_f<TX>(x[(int64_t(n) * g.H + h) * g.W * g.C + int64_t(w0) * g.C + v])
                    : 0.f;
    }
    __syncthreads();
    const int wo = wo0 + int(threadIdx.y);
    if (wo < g.Wo) {
      float out[kV];
#pragma unroll
      for (int e = 0; e < kV; e++) out[e] = tile[off[e]];  // rounded to T once, by the store
      store_f<T, kV>(rows + (int64_t(nh) * g.Wo + wo) * K + col0, out);
    }
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
  const int64_t tile_bytes = tile_values(g, R) * int64_t(sizeof(float));
  if (tile_bytes <= kTileBytesMax) {  // R pixels a tile
    const int64_t tiles = N * Ho * ((Wo + R - 1) / R);
    if (tiles > INT32_MAX) return cudaErrorInvalidValue;
    CS_DISPATCH(tx, TX, CS_DISPATCH(t, T, constexpr auto kernel = stem_rows_tiled_kernel<TX, T>;
                                    kernel<<<grid_stride_blocks<kernel>(tiles * L * R, L * R, size_t(tile_bytes)),
                                             block, size_t(tile_bytes), stream>>>(
                                        static_cast<const TX*>(x), static_cast<T*>(rows), g, int(tiles))));
  } else {
    CS_DISPATCH(tx, TX, CS_DISPATCH(t, T, constexpr auto kernel = stem_rows_kernel<TX, T>;
                                    kernel<<<grid_stride_blocks<kernel>(total * L, L * R), block, 0, stream>>>(
                                        static_cast<const TX*>(x), static_cast<T*>(rows), g, int(total))));
  }
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace cs
