// max_pool.cu: 2-D max pooling over channels_last activations that keeps the
// argmax as one byte per element (its place in the window) instead of
// PyTorch's int64 input index, and a backward pass that gathers each input's
// gradient from the outputs whose windows hold it (no atomics, no zero fill:
// deterministic). Each thread owns 8 consecutive channels of one pixel.
#include "common.cuh"

namespace cs {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kV = 8;

struct Geom {
  int N, H, W, C, Ho, Wo, k, s, p;
};

template <typename T>
__global__ void __launch_bounds__(kThreads)
    max_pool_fwd_kernel(const T* __restrict__ x, T* __restrict__ y, uint8_t* __restrict__ arg, Geom g) {
  const int L = g.C / kV;
  const int64_t total = int64_t(g.N) * g.Ho * g.Wo * L;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * kThreads) {
    const int cg = int(i % L);
    const int64_t pix = i / L;
    const int ow = int(pix % g.Wo), oh = int((pix / g.Wo) % g.Ho), n = int(pix / (int64_t(g.Wo) * g.Ho));
    const int h0 = oh * g.s - g.p, w0 = ow * g.s - g.p;
    float best[kV];
    uint8_t idx[kV];
    // As PyTorch: the first element of the window in range starts as the
    // maximum; a later one replaces it when larger or NaN.
    const int kh0 = h0 < 0 ? -h0 : 0, kw0 = w0 < 0 ? -w0 : 0;
#pragma unroll
    for (int j = 0; j < kV; j++) {
      best[j] = -INFINITY;
      idx[j] = uint8_t(kh0 * g.k + kw0);
    }
    for (int kh = kh0; kh < g.k && h0 + kh < g.H; kh++)
      for (int kw = kw0; kw < g.k && w0 + kw < g.W; kw++) {
        float v[kV];
        load_f<T, kV>(x + ((int64_t(n) * g.H + h0 + kh) * g.W + w0 + kw) * g.C + cg * kV, v);
#pragma unroll
        for (int j = 0; j < kV; j++)
          if (v[j] > best[j] || v[j] != v[j]) {
            best[j] = v[j];
            idx[j] = uint8_t(kh * g.k + kw);
          }
      }
    store_f<T, kV>(y + pix * g.C + cg * kV, best);
    Pack<uint8_t, kV> a;
#pragma unroll
    for (int j = 0; j < kV; j++) a.v[j] = idx[j];
    *reinterpret_cast<Pack<uint8_t, kV>*>(arg + pix * g.C + cg * kV) = a;
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    max_pool_bwd_kernel(const T* __restrict__ dy, const uint8_t* __restrict__ arg, T* __restrict__ dx,
                    Geom g) {
  const int L = g.C / kV;
  const int64_t total = int64_t(g.N) * g.H * g.W * L;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * kThreads) {
    const int cg = int(i % L);
    const int64_t pix = i / L;
    const int w = int(pix % g.W), h = int((pix / g.W) % g.H), n = int(pix / (int64_t(g.W) * g.H));
    // Outputs whose window holds row h: oh s - p <= h <= oh s - p + k - 1.
    const int hp = h + g.p, wp = w + g.p;
    const int oh_lo = hp < g.k ? 0 : (hp - g.k) / g.s + 1, oh_hi = min(g.Ho - 1, hp / g.s);
    const int ow_lo = wp < g.k ? 0 : (wp - g.k) / g.s + 1, ow_hi = min(g.Wo - 1, wp / g.s);
    float acc[kV];
#pragma unroll
    for (int j = 0; j < kV; j++) acc[j] = 0.f;
    for (int oh = oh_lo; oh <= oh_hi; oh++)
      for (int ow = ow_lo; ow <= ow_hi; ow++) {
        const int want = (hp - oh * g.s) * g.k + (wp - ow * g.s);
        const int64_t o = ((int64_t(n) * g.Ho + oh) * g.Wo + ow) * g.C + cg * kV;
        const Pack<uint8_t, kV> a = *reinterpret_cast<const Pack<uint8_t, kV>*>(arg + o);
        float d[kV];
        load_f<T, kV>(dy + o, d);
#pragma unroll
        for (int j = 0; j < kV; j++)
          if (a.v[j] == want) acc[j] += d[j];
      }
    store_f<T, kV>(dx + pix * g.C + cg * kV, acc);
  }
}

// Kernel over n items (8 channels of a pixel each) as one wave of its
// resident blocks.
template <auto Kernel, typename... A>
void launch(int64_t n, cudaStream_t stream, A... args) {
  Kernel<<<grid_stride_blocks<Kernel>(n, kThreads), kThreads, 0, stream>>>(args...);
}

}  // namespace

bool max_pool_supports(int64_t C, int64_t k, int64_t s, int64_t p) {
  return C >= kV && C % kV == 0 && k >= 1 && k * k <= 255 && s >= 1 && p >= 0 && 2 * p <= k;
}

cudaError_t max_pool_fwd(const void* x, void* y, uint8_t* arg, DType t, int64_t N, int64_t H,
                         int64_t W, int64_t C, int64_t Ho, int64_t Wo, int64_t k, int64_t s,
                         int64_t p, cudaStream_t stream) {
  if (!max_pool_supports(C, k, s, p) || t == DType::F32 || !aligned(x, 16) || !aligned(y, 16) ||
      !aligned(arg, 8))
    return cudaErrorInvalidValue;
  const Geom g{int(N), int(H), int(W), int(C), int(Ho), int(Wo), int(k), int(s), int(p)};
  const int64_t n = N * Ho * Wo * (C / kV);
  if (t == DType::BF16)
    launch<max_pool_fwd_kernel<__nv_bfloat16>>(n, stream, static_cast<const __nv_bfloat16*>(x),
                                               static_cast<__nv_bfloat16*>(y), arg, g);
  else
    launch<max_pool_fwd_kernel<__half>>(n, stream, static_cast<const __half*>(x), static_cast<__half*>(y), arg, g);
  return cudaGetLastError();
}

cudaError_t max_pool_bwd(const void* dy, const uint8_t* arg, void* dx, DType t, int64_t N,
                         int64_t H, int64_t W, int64_t C, int64_t Ho, int64_t Wo, int64_t k,
                         int64_t s, int64_t p, cudaStream_t stream) {
  if (!max_pool_supports(C, k, s, p) || t == DType::F32 || !aligned(dy, 16) || !aligned(dx, 16) ||
      !aligned(arg, 8))
    return cudaErrorInvalidValue;
  const Geom g{int(N), int(H), int(W), int(C), int(Ho), int(Wo), int(k), int(s), int(p)};
  const int64_t n = N * H * W * (C / kV);
  if (t == DType::BF16)
    launch<max_pool_bwd_kernel<__nv_bfloat16>>(n, stream, static_cast<const __nv_bfloat16*>(dy), arg,
                                               static_cast<__nv_bfloat16*>(dx), g);
  else
    launch<max_pool_bwd_kernel<__half>>(n, stream, static_cast<const __half*>(dy), arg, static_cast<__half*>(dx), g);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace cs
