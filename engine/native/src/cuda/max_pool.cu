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

// The kernels of 32-bit indices: f(n, row, col, cg, pix) for each item of
// 8 channels (group cg) of pixel pix = (n, row, col) of an image of rows x
// cols pixels and C channels, grid-stride.
template <typename F>
__device__ __forceinline__ void items32(const Geom& g, int rows, int cols, F f) {
  const unsigned L = unsigned(g.C / kV), R = unsigned(rows), W = unsigned(cols);
  const unsigned total = unsigned(g.N) * R * W * L;
  for (unsigned i = blockIdx.x * kThreads + threadIdx.x; i < total; i += gridDim.x * kThreads) {
    const unsigned pix = i / L, nr = pix / W;
    f(nr / R, nr % R, pix % W, i % L, pix);
  }
}

// max_pool_fwd_kernel for k x k windows of a size known at compile time
// (ResNet-50's 3 x 3) whose indices fit 32 bits: the window's in-range loads
// issued together (predicated), then compared in the same order (kh, then kw
// ascending: the same maxima and ties). The general kernel's loops with
// data-dependent bounds kept one load in flight and divided 64-bit indices
// (the H200 profile of e0a292f: 0.31 ms for 0.57 GB, 38% of the roofline).
template <typename T, int K>
__global__ void __launch_bounds__(kThreads)
    max_pool_fwd_k_kernel(const T* __restrict__ x, T* __restrict__ y, uint8_t* __restrict__ arg, Geom g) {
  items32(g, g.Ho, g.Wo, [&](unsigned n, unsigned oh, unsigned ow, unsigned cg, unsigned pix) {
    const int h0 = int(oh) * g.s - g.p, w0 = int(ow) * g.s - g.p;
    const unsigned base = n * unsigned(g.H) * unsigned(g.W) * unsigned(g.C) + cg * kV;
    Pack<T, kV> v[K][K];
#pragma unroll
    for (int kh = 0; kh < K; kh++)
#pragma unroll
      for (int kw = 0; kw < K; kw++) {
        const int h = h0 + kh, w = w0 + kw;
        if (h >= 0 && h < g.H && w >= 0 && w < g.W)
          v[kh][kw] = *reinterpret_cast<const Pack<T, kV>*>(x + base + (unsigned(h) * unsigned(g.W) + unsigned(w)) * unsigned(g.C));
      }
    // As PyTorch: the first element of the window in range starts as the
    // maximum; a later one replaces it when larger or NaN.
    const int kh0 = h0 < 0 ? -h0 : 0, kw0 = w0 < 0 ? -w0 : 0;
    float best[kV];
    uint8_t idx[kV];
#pragma unroll
    for (int j = 0; j < kV; j++) {
      best[j] = -INFINITY;
      idx[j] = uint8_t(kh0 * K + kw0);
    }
#pragma unroll
    for (int kh = 0; kh < K; kh++)
#pragma unroll
      for (int kw = 0; kw < K; kw++) {
        const int h = h0 + kh, w = w0 + kw;
        if (!(h >= 0 && h < g.H && w >= 0 && w < g.W)) continue;
#pragma unroll
        for (int j = 0; j < kV; j++) {
          const float e = to_f<T>(v[kh][kw].v[j]);
          if (e > best[j] || e != e) {
            best[j] = e;
            idx[j] = uint8_t(kh * K + kw);
          }
        }
      }
    store_f<T, kV>(y + int64_t(pix) * g.C + cg * kV, best);
    Pack<uint8_t, kV> a;
#pragma unroll
    for (int j = 0; j < kV; j++) a.v[j] = idx[j];
    *reinterpret_cast<Pack<uint8_t, kV>*>(arg + int64_t(pix) * g.C + cg * kV) = a;
  });
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

// max_pool_bwd_kernel where each input row and column lies in at most 2
// windows (k <= 2 s: ResNet-50's 3 x 3 stride 2) and the items fit 32-bit
// indices: the up to 4 windows' argmax and gradient loads issued together,
// then added in the same order (oh, then ow, ascending: the same sums). The
// general kernel's loop over a data-dependent window count kept one window's
// loads in flight and divided 64-bit indices per item (the H200 profile of
// e0a292f: 0.59 ms a step for 0.57 GB, 20% of the memory roofline; SASS of
// nvcc 11.8: 4 calls of the 64-bit division routine). nvcc 11.8 gives it 90
// registers for bf16 (2 blocks a multiprocessor, up to 4 x 24 bytes in flight
// a thread) and spills at 80 (3 blocks).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    max_pool_bwd2_kernel(const T* __restrict__ dy, const uint8_t* __restrict__ arg, T* __restrict__ dx,
                         Geom g) {
  items32(g, g.H, g.W, [&](unsigned n, unsigned h, unsigned w, unsigned cg, unsigned pix) {
    const int hp = int(h) + g.p, wp = int(w) + g.p;
    const int oh_lo = hp < g.k ? 0 : (hp - g.k) / g.s + 1, oh_hi = min(g.Ho - 1, hp / g.s);
    const int ow_lo = wp < g.k ? 0 : (wp - g.k) / g.s + 1, ow_hi = min(g.Wo - 1, wp / g.s);
    // The window (oh_lo, ow_lo)'s element; the next column C on, the next row Wo C.
    const unsigned o0 = ((n * unsigned(g.Ho) + unsigned(oh_lo)) * unsigned(g.Wo) + unsigned(ow_lo)) * unsigned(g.C) + cg * kV;
    Pack<uint8_t, kV> a[2][2];
    Pack<T, kV> d[2][2];
#pragma unroll
    for (int jh = 0; jh < 2; jh++)
#pragma unroll
      for (int jw = 0; jw < 2; jw++)
        if (oh_lo + jh <= oh_hi && ow_lo + jw <= ow_hi) {
          const unsigned o = o0 + (jh * unsigned(g.Wo) + jw) * unsigned(g.C);
          a[jh][jw] = *reinterpret_cast<const Pack<uint8_t, kV>*>(arg + o);
          d[jh][jw] = *reinterpret_cast<const Pack<T, kV>*>(dy + o);
        }
    float acc[kV];
#pragma unroll
    for (int j = 0; j < kV; j++) acc[j] = 0.f;
#pragma unroll
    for (int jh = 0; jh < 2; jh++)
#pragma unroll
      for (int jw = 0; jw < 2; jw++)
        if (oh_lo + jh <= oh_hi && ow_lo + jw <= ow_hi) {
          const int want = (hp - (oh_lo + jh) * g.s) * g.k + (wp - (ow_lo + jw) * g.s);
#pragma unroll
          for (int j = 0; j < kV; j++)
            if (a[jh][jw].v[j] == want) acc[j] += to_f<T>(d[jh][jw].v[j]);
        }
    store_f<T, kV>(dx + int64_t(pix) * g.C + cg * kV, acc);
  });
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
  // 3 x 3 windows (ResNet-50's), every element index under 2^32.
  const bool k3 = k == 3 && N * H * W * C < (int64_t(1) << 32);
  if (t == DType::BF16) {
    using B = __nv_bfloat16;
    if (k3)
      launch<max_pool_fwd_k_kernel<B, 3>>(n, stream, static_cast<const B*>(x), static_cast<B*>(y), arg, g);
    else
      launch<max_pool_fwd_kernel<B>>(n, stream, static_cast<const B*>(x), static_cast<B*>(y), arg, g);
  } else if (k3) {
    launch<max_pool_fwd_k_kernel<__half, 3>>(n, stream, static_cast<const __half*>(x), static_cast<__half*>(y), arg, g);
  } else {
    launch<max_pool_fwd_kernel<__half>>(n, stream, static_cast<const __half*>(x), static_cast<__half*>(y), arg, g);
  }
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
  // Each input in at most 2 x 2 windows, and every index of the input and
  // the output (elements) under 2^32: the kernel of up to 4 windows at once.
  const bool two = k <= 2 * s && N * H * W * C < (int64_t(1) << 32) && N * Ho * Wo * C < (int64_t(1) << 32);
  if (t == DType::BF16) {
    using B = __nv_bfloat16;
    if (two)
      launch<max_pool_bwd2_kernel<B>>(n, stream, static_cast<const B*>(dy), arg, static_cast<B*>(dx), g);
    else
      launch<max_pool_bwd_kernel<B>>(n, stream, static_cast<const B*>(dy), arg, static_cast<B*>(dx), g);
  } else if (two) {
    launch<max_pool_bwd2_kernel<__half>>(n, stream, static_cast<const __half*>(dy), arg, static_cast<__half*>(dx), g);
  } else {
    launch<max_pool_bwd_kernel<__half>>(n, stream, static_cast<const __half*>(dy), arg, static_cast<__half*>(dx), g);
  }
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace cs
