// bn_relu.cu: training-mode batch norm over channels_last activations ([M =
// N H W rows, C channels]) with the residual add and the ReLU after it fused
// in, forward and backward. Each thread owns 8 consecutive channels (one
// 16-byte access of bf16/fp16) of some rows; statistics are fp32 sums of x - K
// and (x - K)^2 per thread, K a shift per channel and block (its first row),
// added over the block's threads and turned into (count, mean, m2) per block,
// then combined exactly over the blocks, all in a fixed order
// (deterministic). The ReLU's backward reads a bit mask (1 bit per element)
// written by the forward pass, or recomputes it from the batch norm's input
// and the forward's scale and shift (bn_act_bwd_remask).
#include <type_traits>

#include "common.cuh"

namespace cs {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kV = 8;          // channels per thread
// The finalizers: a block of 32 channels x kSumLanes lanes; lane l combines
// the partials l, l + kSumLanes, ... of its channel in order, then the lanes
// are combined pairwise in a fixed tree (deterministic). With 4 blocks per SM
// of partials (528 on an H200) each lane walks 17 of them (8 lanes walked 66
// one after another: 45 us a call, 2.4 ms of ResNet-50's step at 256 x 224).
constexpr int kSumLanes = 32;

// Rows whose loads a reduction's thread issues before it adds the first of
// them. A `#pragma unroll` of the loop over rows R apart (R = kThreads / (C /
// kV), known at run time) kept a bounds test and a branch before each row's
// loads, so each thread had one row's loads in flight (cuobjdump -sass, nvcc
// 11.8 for sm_90: one LDG.E.128 a branch in bn_fwd_stats): 16 KB a
// multiprocessor at 4 blocks of 256 threads, too few bytes to cover the
// memory's latency (the H200 profile of e0a292f: bn_fwd_stats at 61% of its
// roofline, bn_bwd_reduce at 69-74%, the one-pass kernels at 85-92%). The
// rows' loads are now issued together, predicated, then added in row order
// (the same sums in the same order as one row at a time).
// One tensor read: 4 x 16 bytes in flight a thread. nvcc 11.8 for sm_90 gives
// the bf16 kernel 80 registers (3 blocks a multiprocessor, not kMaxPerSm's 4;
// fp16 64: 4), a review's count; the GPU machine's nvcc 13 may differ.
constexpr int kStatsRows = 4;
// The backward's reduction: up to three tensors and the mask a row, 2 rows
// (98 bytes) with a second gradient, else 4 (132 bytes), at 2 blocks a
// multiprocessor (nvcc 11.8 for sm_90: 92-128 registers, two bf16 variants at
// the 128 that __launch_bounds__ allows, no spills; at 3 blocks, 80 registers,
// bf16's variants spilled 8-86 bytes).
template <bool DY2>
constexpr int kBwdRows = DY2 ? 2 : 4;
constexpr int kBwdBlocks = 2;  // at most kMaxPerSm

// load(u, row) for the rows r + u R (u < U) before r1.
template <int U, typename F>
__device__ __forceinline__ void in_flight(int64_t r, int R, int64_t r1, F load) {
#pragma unroll
  for (int u = 0; u < U; u++)
    if (r + int64_t(u) * R < r1) load(u, r + int64_t(u) * R);
}

template <typename T>
__device__ __forceinline__ Pack<T, kV> load_pack(const T* p) {
  return *reinterpret_cast<const Pack<T, kV>*>(p);
}

template <typename T>
__device__ __forceinline__ void unpack(const Pack<T, kV>& pk, float (&out)[kV]) {
#pragma unroll
  for (int k = 0; k < kV; k++) out[k] = to_f<T>(pk.v[k]);
}

// Rows per block and blocks of the reductions over M rows: at most cap
// blocks. The scratch is laid out for kMaxPerSm blocks a multiprocessor.
constexpr int kMaxPerSm = 4;
struct Split {
  int64_t rows_per_block, blocks;
};
Split split(int64_t M, int64_t cap = int64_t(sm_count()) * kMaxPerSm) {
  int64_t blocks = M < cap ? M : cap;
  if (blocks < 1) blocks = 1;
  const int64_t rpb = (M + blocks - 1) / blocks;
  return {rpb, (M + rpb - 1) / rpb};
}

// Kernel over M rows as one wave of its resident blocks, at most per_sm a
// multiprocessor (at most kMaxPerSm; a grid larger than its resident blocks
// ran in two waves, the second a quarter full): launched with args..., then
// the rows per block and part; returns the split it ran with.
template <auto Kernel, typename... A>
Split over_rows(int64_t M, int per_sm, float* part, cudaStream_t stream, A... args) {
  const int64_t most = int64_t(sm_count()) * per_sm, resident = resident_blocks<Kernel>(kThreads);
  const Split s = split(M, resident < most ? resident : most);
  Kernel<<<unsigned(s.blocks), kThreads, 0, stream>>>(args..., s.rows_per_block, part);
  return s;
}

// f(std::bool_constant<a>, ...): runtime flags as compile-time ones.
template <typename F>
auto with_flags(bool a, bool b, F f) {
  const std::true_type yes;
  const std::false_type no;
  return a ? (b ? f(yes, yes) : f(yes, no)) : (b ? f(no, yes) : f(no, no));
}
template <typename F>
auto with_flags(bool a, bool b, bool c, F f) {
  return c ? with_flags(a, b, [&](auto x, auto y) { return f(x, y, std::true_type{}); })
           : with_flags(a, b, [&](auto x, auto y) { return f(x, y, std::false_type{}); });
}

// The end of a block's reduction: its threads have stored their sums in a
// [R][C] and b [R][C]; per channel c (one thread each) the sums over the R
// rows of threads, in order, go to emit(c, sum of a, sum of b).
template <typename Emit>
__device__ __forceinline__ void block_sums(const float* a, const float* b, int R, int C, Emit emit) {
  __syncthreads();
  for (int c = threadIdx.x; c < C; c += kThreads) {
    float sa = 0.f, sb = 0.f;
    for (int i = 0; i < R; i++) {
      sa += a[i * C + c];
      sb += b[i * C + c];
    }
    emit(c, sa, sb);
  }
}

// Sums s[0..kSumLanes)[x] into s[0][x] pairwise in a fixed tree, for each s
// (every thread of the block calls it; s[0][x] is read after it returns).
template <typename... S>
__device__ __forceinline__ void lanes_sum(int lane, int x, S&... s) {
  __syncthreads();
  for (int half = kSumLanes / 2; half > 0; half /= 2) {  // lane l takes in lane l + half
    if (lane < half) ((s[lane][x] += s[lane + half][x]), ...);
    __syncthreads();
  }
}

// A finalizer lane's walk over the partials i = lane, lane + kSumLanes, ...
// < blocks in that order: load(i, v) reads partial i's N values, then add(v)
// takes them in; kFinRows partials' loads are issued before the first add (a
// `#pragma unroll 4` of the plain loop had 4 in flight: 4-5 dependent rounds
// of loads for 12-17 partials a lane). Loads first, arithmetic after: with a
// term's arithmetic between its loads nvcc kept one partial in flight.
constexpr int kFinRows = 8;
template <int N, typename Load, typename Add>
__device__ __forceinline__ void lane_walk(int lane, int64_t blocks, Load load, Add add) {
  for (int64_t i0 = lane; i0 < blocks; i0 += kFinRows * kSumLanes) {
    float v[kFinRows][N];
#pragma unroll
    for (int u = 0; u < kFinRows; u++)
      if (i0 + u * kSumLanes < blocks) load(i0 + u * kSumLanes, v[u]);
#pragma unroll
    for (int u = 0; u < kFinRows; u++) {
      if (i0 + u * kSumLanes >= blocks) break;
      add(v[u]);
    }
  }
}

// Per block: per channel the sums of x - K and (x - K)^2 over its rows, K
// the block's first row (no division per row, the threads' sums add up
// plainly) -> part [block][3][C] as (count, mean, m2).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    bn_fwd_stats_kernel(const T* __restrict__ x, int64_t M, int C, int64_t rows_per_block,
                 float* __restrict__ part) {
  __shared__ float s_s1[kThreads * kV], s_s2[kThreads * kV];
  const int L = C / kV, R = kThreads / L;
  const int cg = threadIdx.x % L, rl = threadIdx.x / L;
  const int64_t r0 = int64_t(blockIdx.x) * rows_per_block;
  const int64_t r1 = r0 + rows_per_block < M ? r0 + rows_per_block : M;
  if (rl < R) {
    float K[kV], s1[kV], s2[kV];
    load_f<T, kV>(x + r0 * C + cg * kV, K);
#pragma unroll
    for (int k = 0; k < kV; k++) s1[k] = s2[k] = 0.f;
    const T* xc = x + cg * kV;
    for (int64_t r = r0 + rl; r < r1; r += kStatsRows * R) {
      Pack<T, kV> p[kStatsRows];
      in_flight<kStatsRows>(r, R, r1, [&](int u, int64_t row) { p[u] = load_pack<T>(xc + row * C); });
#pragma unroll
      for (int u = 0; u < kStatsRows; u++) {  // in row order, as one row at a time
        if (r + u * R >= r1) break;
        float v[kV];
        unpack(p[u], v);
#pragma unroll
        for (int k = 0; k < kV; k++) {
          const float d = v[k] - K[k];
          s1[k] += d;
          s2[k] += d * d;
        }
      }
    }
#pragma unroll
    for (int k = 0; k < kV; k++) {
      s_s1[rl * C + cg * kV + k] = s1[k];
      s_s2[rl * C + cg * kV + k] = s2[k];
    }
  }
  const float n = float(r1 - r0);
  float* out = part + int64_t(blockIdx.x) * 3 * C;
  block_sums(s_s1, s_s2, R, C, [&](int c, float s1, float s2) {
    const float d = s1 / n;  // the mean's offset from K
    out[c] = n;
    out[C + c] = to_f<T>(x[r0 * C + c]) + d;
    out[2 * C + c] = fmaxf(s2 - s1 * d, 0.f);
  });
}

// Per channel: the blocks' partials (count n_i, mean_i, m2_i) combined
// exactly in two passes, mean = sum n_i mean_i / M, then m2 = sum m2_i +
// n_i (mean_i - mean)^2 (kSumLanes lanes, each over every kSumLanes-th block
// in order, then the lanes in a fixed tree); mean, invstd, the running
// statistics (momentum, unbiased variance), and the affine transform as
// scale = w invstd, shift = b - mean scale.
__global__ void __launch_bounds__(32 * kSumLanes)
    bn_fwd_finalize_kernel(const float* __restrict__ part, int64_t blocks, int C, int64_t M,
                          const float* __restrict__ w, const float* __restrict__ b, float eps,
                          float momentum, float* running_mean, float* running_var,
                          float* __restrict__ save_mean, float* __restrict__ save_invstd,
                          float* __restrict__ scale, float* __restrict__ shift) {
  __shared__ float s_sum[kSumLanes][32], s_m2[kSumLanes][32];
  const int x = threadIdx.x, lane = threadIdx.y;
  const int c = blockIdx.x * 32 + x;
  const bool in = c < C;
  // part [block][3][C]: count, mean, m2.
  auto load = [&](int64_t i, float (&v)[3]) {
    const float* p = part + i * 3 * C + c;
#pragma unroll
    for (int j = 0; j < 3; j++) v[j] = p[j * C];
  };
  float acc = 0.f;
  if (in) lane_walk<3>(lane, blocks, load, [&](const float (&v)[3]) { acc += v[0] * v[1]; });
  s_sum[lane][x] = acc;
  lanes_sum(lane, x, s_sum);
  const float mean = s_sum[0][x] / float(M);
  acc = 0.f;
  if (in)
    lane_walk<3>(lane, blocks, load, [&](const float (&v)[3]) {
      const float d = v[1] - mean;
      acc += v[2] + v[0] * d * d;
    });
  s_m2[lane][x] = acc;
  lanes_sum(lane, x, s_m2);
  if (lane != 0 || !in) return;
  const float m2 = s_m2[0][x];
  const float var = m2 / float(M);
  const float invstd = rsqrtf(var + eps);
  save_mean[c] = mean;
  save_invstd[c] = invstd;
  if (running_mean) running_mean[c] = (1.f - momentum) * running_mean[c] + momentum * mean;
  if (running_var) {
    const float unbiased = M > 1 ? m2 / float(M - 1) : var;
    running_var[c] = (1.f - momentum) * running_var[c] + momentum * unbiased;
  }
  const float s = w[c] * invstd;
  scale[c] = s;
  shift[c] = b[c] - mean * s;
}

// Per channel from sums (a convolution's fused statistics, cuDNN's GenStats:
// sum and sum of squares of x over M rows, fp32): mean, invstd (the variance
// sqsum / M - mean^2 in double, clamped at 0), the running statistics, the
// affine transform as scale, shift in coef [2][C] and, where coef16 is set, the
// same rounded to fp16 (a fused convolution's scale-bias prologue takes fp16).
__global__ void bn_sums_finalize_kernel(const float* __restrict__ sum, const float* __restrict__ sqsum,
                                        int C, int64_t M, const float* __restrict__ w,
                                        const float* __restrict__ b, float eps, float momentum,
                                        float* running_mean, float* running_var,
                                        float* __restrict__ save_mean, float* __restrict__ save_invstd,
                                        float* __restrict__ coef, __half* __restrict__ coef16) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const double mean = double(sum[c]) / double(M);
  double var = double(sqsum[c]) / double(M) - mean * mean;
  if (var < 0) var = 0;
  const float invstd = rsqrtf(float(var) + eps);
  save_mean[c] = float(mean);
  save_invstd[c] = invstd;
  if (running_mean) running_mean[c] = (1.f - momentum) * running_mean[c] + momentum * float(mean);
  if (running_var) {
    const double unbiased = M > 1 ? var * double(M) / double(M - 1) : var;
    running_var[c] = (1.f - momentum) * running_var[c] + momentum * float(unbiased);
  }
  const float s = w[c] * invstd, t = b[c] - float(mean) * s;
  coef[c] = s;
  coef[C + c] = t;
  if (coef16) {
    coef16[c] = __float2half_rn(s);
    coef16[C + c] = __float2half_rn(t);
  }
}

// The coefficients of channels c0 .. c0 + kV - 1 from coef [NC][C].
template <int NC>
__device__ __forceinline__ void load_coefs(const float* coef, int C, int c0, float (&k)[NC][kV]) {
#pragma unroll
  for (int j = 0; j < NC; j++) load_f<float, kV>(coef + j * C + c0, k[j]);
}

// y = relu?(x scale + shift (+ residual)), scale and shift in coef [2][C];
// mask bit k of byte (row, group) is y > 0 for channel 8 group + k. FIXED:
// a thread's channels stay the same over its loop (its coefficients loaded
// once).
template <typename T, bool RES, bool RELU, bool FIXED>
__global__ void __launch_bounds__(kThreads)
    bn_fwd_apply_kernel(const T* __restrict__ x, const T* __restrict__ res, const float* __restrict__ coef,
                 T* __restrict__ y, uint8_t* __restrict__ mask, int64_t vecs, int C) {
  const int L = C / kV;
  int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  float sc[2][kV];
  if (FIXED) load_coefs<2>(coef, C, int(i % L) * kV, sc);
  for (; i < vecs; i += int64_t(gridDim.x) * kThreads) {
    if (!FIXED) load_coefs<2>(coef, C, int(i % L) * kV, sc);
    float v[kV];
    load_f<T, kV>(x + i * kV, v);
#pragma unroll
    for (int k = 0; k < kV; k++) v[k] = __fmaf_rn(v[k], sc[0][k], sc[1][k]);  // as relu_keeps
    if (RES) {
      float r[kV];
      load_f<T, kV>(res + i * kV, r);
#pragma unroll
      for (int k = 0; k < kV; k++) v[k] += r[k];
    }
    if (RELU) {
      unsigned bits = 0;
#pragma unroll
      for (int k = 0; k < kV; k++) {
        // As torch's relu: NaN stays NaN (and passes its gradient).
        const bool keep = !(v[k] <= 0.f);
        bits |= unsigned(keep) << k;
        v[k] = keep ? v[k] : 0.f;
      }
      mask[i] = uint8_t(bits);
    }
    store_f<T, kV>(y + i * kV, v);
  }
}

// Where the backward's ReLU mask comes from: none (no ReLU), the forward's
// bits (mask), or recomputed from x and the forward's apply coefficients
// relu_coef [2][C] (scale, shift) as bn_fwd_apply_kernel computed its bits:
// the same expression on the same values, the same bits.
enum : int { kNoRelu = 0, kMaskBits = 1, kMaskCoef = 2 };

// Whether the ReLU passed x scale + shift (as bn_fwd_apply_kernel without a
// residual: NaN passes). One explicit fused multiply-add on both sides, so
// the bits agree whatever the compiler contracts.
__device__ __forceinline__ bool relu_keeps(float x, float scale, float shift) {
  return !(__fmaf_rn(x, scale, shift) <= 0.f);
}

// Per block: sums over its rows of g and g xhat per channel (g = dy, plus dy2
// with DY2, masked by the ReLU), -> part [block][2][C]; with DRES also writes
// g as the residual's gradient (DY2 only with DRES). RELU: kNoRelu,
// kMaskBits or kMaskCoef (then neither DRES nor DY2).
template <typename T, int RELU, bool DRES, bool DY2>
__global__ void __launch_bounds__(kThreads, kBwdBlocks)
    bn_bwd_reduce_kernel(const T* __restrict__ dy, const T* __restrict__ dy2,
                      const uint8_t* __restrict__ mask, const float* __restrict__ relu_coef,
                      const T* __restrict__ x, const float* __restrict__ save_mean,
                      const float* __restrict__ save_invstd, T* __restrict__ dres, int64_t M, int C,
                      int64_t rows_per_block, float* __restrict__ part) {
  __shared__ float s_g[kThreads * kV], s_gx[kThreads * kV];
  const int L = C / kV, R = kThreads / L;
  const int cg = threadIdx.x % L, rl = threadIdx.x / L;
  const int64_t r0 = int64_t(blockIdx.x) * rows_per_block;
  const int64_t r1 = r0 + rows_per_block < M ? r0 + rows_per_block : M;
  constexpr int kRows = kBwdRows<DY2>;
  float sg[kV], sgx[kV];
#pragma unroll
  for (int k = 0; k < kV; k++) sg[k] = sgx[k] = 0.f;
  if (rl < R) {
    float mu[kV], is[kV], rc[2][kV];
    load_f<float, kV>(save_mean + cg * kV, mu);
    load_f<float, kV>(save_invstd + cg * kV, is);
    if (RELU == kMaskCoef) load_coefs<2>(relu_coef, C, cg * kV, rc);
    for (int64_t r = r0 + rl; r < r1; r += kRows * R) {
      Pack<T, kV> pg[kRows], px[kRows], pg2[kRows];
      uint8_t pm[kRows];
      in_flight<kRows>(r, R, r1, [&](int u, int64_t row) {
        const int64_t off = row * C + cg * kV;
        pg[u] = load_pack<T>(dy + off);
        px[u] = load_pack<T>(x + off);
        if (DY2) pg2[u] = load_pack<T>(dy2 + off);
        if (RELU == kMaskBits) pm[u] = mask[off / kV];
      });
#pragma unroll
      for (int u = 0; u < kRows; u++) {  // in row order, as one row at a time
        if (r + u * R >= r1) break;
        const int64_t off = (r + u * R) * C + cg * kV;
        float g[kV], v[kV];
        unpack(pg[u], g);
        unpack(px[u], v);
        if (DY2) {  // the sum rounded to T, as a separate add rounds it
          float g2[kV];
          unpack(pg2[u], g2);
#pragma unroll
          for (int k = 0; k < kV; k++) g[k] = to_f<T>(from_f<T>(g[k] + g2[k]));
        }
        if (RELU == kMaskBits) {
          const unsigned bits = pm[u];
#pragma unroll
          for (int k = 0; k < kV; k++) g[k] = (bits >> k) & 1u ? g[k] : 0.f;
        } else if (RELU == kMaskCoef) {
#pragma unroll
          for (int k = 0; k < kV; k++) g[k] = relu_keeps(v[k], rc[0][k], rc[1][k]) ? g[k] : 0.f;
        }
        if (DRES) store_f<T, kV>(dres + off, g);
#pragma unroll
        for (int k = 0; k < kV; k++) {
          sg[k] += g[k];
          sgx[k] += g[k] * (v[k] - mu[k]) * is[k];
        }
      }
    }
#pragma unroll
    for (int k = 0; k < kV; k++) {
      s_g[rl * C + cg * kV + k] = sg[k];
      s_gx[rl * C + cg * kV + k] = sgx[k];
    }
  }
  float* out = part + int64_t(blockIdx.x) * 2 * C;
  block_sums(s_g, s_gx, R, C, [&](int c, float a, float bb) {
    out[c] = a;
    out[C + c] = bb;
  });
}

// Per channel: dbias = sum g, dweight = sum g xhat (over the blocks'
// partials: kSumLanes lanes in order, then the lanes in a fixed tree) and the
// coefficients of dx = k1 g - kb - (x - mean) kx = k1 g - kx x + k0 as coef
// [3][C] = (k1, kx, k0): k1 = w invstd, kb = k1 dbias / M, kx = k1 invstd
// dweight / M, k0 = kx mean - kb.
__global__ void __launch_bounds__(32 * kSumLanes)
    bn_bwd_finalize_kernel(const float* __restrict__ part, int64_t blocks, int C, int64_t M,
                        const float* __restrict__ w, const float* __restrict__ save_mean,
                        const float* __restrict__ save_invstd, float* __restrict__ dw,
                        float* __restrict__ db, float* __restrict__ coef) {
  __shared__ float sa[kSumLanes][32], sb[kSumLanes][32];
  const int x = threadIdx.x, lane = threadIdx.y;
  const int c = blockIdx.x * 32 + x;
  float a = 0.f, bb = 0.f;
  if (c < C)
    lane_walk<2>(
        lane, blocks,
        [&](int64_t i, float (&v)[2]) {
          v[0] = part[i * 2 * C + c];
          v[1] = part[i * 2 * C + C + c];
        },
        [&](const float (&v)[2]) {
          a += v[0];
          bb += v[1];
        });
  sa[lane][x] = a;
  sb[lane][x] = bb;
  lanes_sum(lane, x, sa, sb);
  if (lane != 0 || c >= C) return;
  a = sa[0][x];
  bb = sb[0][x];
  db[c] = a;
  dw[c] = bb;
  const float is = save_invstd[c], k1 = w[c] * is;
  const float kb = k1 * a / float(M), kx = k1 * is * bb / float(M);
  coef[c] = k1;
  coef[C + c] = kx;
  coef[2 * C + c] = kx * save_mean[c] - kb;
}

// dx = k1 g - kx x + k0 (g masked by the ReLU: RELU as for the reduction),
// coef [3][C] = (k1, kx, k0); FIXED as for the forward's apply.
template <typename T, int RELU, bool FIXED>
__global__ void __launch_bounds__(kThreads)
    bn_bwd_apply_kernel(const T* __restrict__ dy, const uint8_t* __restrict__ mask,
                     const float* __restrict__ relu_coef, const T* __restrict__ x,
                     const float* __restrict__ coef, T* __restrict__ dx, int64_t vecs, int C) {
  const int L = C / kV;
  int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  float k[3][kV], rc[2][kV];
  if (FIXED) load_coefs<3>(coef, C, int(i % L) * kV, k);
  if (FIXED && RELU == kMaskCoef) load_coefs<2>(relu_coef, C, int(i % L) * kV, rc);
  for (; i < vecs; i += int64_t(gridDim.x) * kThreads) {
    if (!FIXED) load_coefs<3>(coef, C, int(i % L) * kV, k);
    if (!FIXED && RELU == kMaskCoef) load_coefs<2>(relu_coef, C, int(i % L) * kV, rc);
    float g[kV], v[kV];
    load_f<T, kV>(dy + i * kV, g);
    load_f<T, kV>(x + i * kV, v);
    const unsigned bits = RELU == kMaskBits ? mask[i] : 0xffu;
#pragma unroll
    for (int e = 0; e < kV; e++) {
      const bool keep = RELU == kMaskCoef ? relu_keeps(v[e], rc[0][e], rc[1][e]) : ((bits >> e) & 1u) != 0;
      const float ge = keep ? g[e] : 0.f;
      v[e] = k[0][e] * ge - k[1][e] * v[e] + k[2][e];
    }
    store_f<T, kV>(dx + i * kV, v);
  }
}

// Fixed or Moving (the same kernel, FIXED or not) over vecs items of kV
// channels as one wave of resident blocks, launched with args..., vecs, C:
// Fixed where each thread's channels stay the same over its loop (one item a
// thread, or a stride a multiple of the C / kV channel groups).
template <auto Fixed, auto Moving, typename... A>
void over_items(int64_t vecs, int C, cudaStream_t stream, A... args) {
  const unsigned grid = grid_stride_blocks<Fixed>(vecs, kThreads);
  const int64_t stride = int64_t(grid) * kThreads;
  if (stride >= vecs || stride % (C / kV) == 0)
    Fixed<<<grid, kThreads, 0, stream>>>(args..., vecs, C);
  else
    Moving<<<grid_stride_blocks<Moving>(vecs, kThreads), kThreads, 0, stream>>>(args..., vecs, C);
}

// The apply pass: y = relu?(x scale + shift (+ res)), the mask, coef [2][C].
template <typename T>
void apply(const void* x, const void* res, const float* coef, void* y, uint8_t* mask, int64_t M, int64_t C,
           bool relu, cudaStream_t stream) {
  const T* xt = static_cast<const T*>(x);
  const T* rt = static_cast<const T*>(res);
  T* yt = static_cast<T*>(y);
  with_flags(res != nullptr, relu, [&](auto res_flag, auto relu_flag) {
    constexpr bool kRes = decltype(res_flag)::value, kRelu = decltype(relu_flag)::value;
    over_items<bn_fwd_apply_kernel<T, kRes, kRelu, true>, bn_fwd_apply_kernel<T, kRes, kRelu, false>>(
        M * C / kV, int(C), stream, xt, rt, coef, yt, mask);
  });
}

template <typename T>
cudaError_t fwd(const void* x, const void* res, const float* w, const float* b, float* rm,
                float* rv, void* y, uint8_t* mask, float* save_mean, float* save_invstd,
                float* scratch, int64_t M, int64_t C, float eps, float momentum, bool relu,
                cudaStream_t stream) {
  float* part = scratch;                                // [blocks][3][C]
  float* coef = scratch + split(M).blocks * 3 * C;      // [2][C]: scale, shift
  const T* xt = static_cast<const T*>(x);
  const Split s = over_rows<bn_fwd_stats_kernel<T>>(M, kMaxPerSm, part, stream, xt, M, int(C));
  bn_fwd_finalize_kernel<<<unsigned((C + 31) / 32), dim3(32, kSumLanes), 0, stream>>>(
      part, s.blocks, int(C), M, w, b, eps, momentum, rm, rv, save_mean, save_invstd, coef, coef + C);
  apply<T>(x, res, coef, y, mask, M, C, relu, stream);
  return cudaGetLastError();
}

// relu_coef (not null: relu without dres or dy2): the mask recomputed from x
// (kMaskCoef), mask unused.
template <typename T>
cudaError_t bwd(const void* dy, const void* dy2, const uint8_t* mask, const float* relu_coef, const void* x,
                const float* w, const float* save_mean, const float* save_invstd, void* dx, void* dres,
                float* dw, float* db, float* scratch, int64_t M, int64_t C, bool relu, cudaStream_t stream) {
  float* part = scratch;                             // [blocks][2][C]
  float* coef = scratch + split(M).blocks * 2 * C;   // [3][C]: k1, kx, k0
  const T* dyt = static_cast<const T*>(dy);
  const T* dy2t = static_cast<const T*>(dy2);
  const T* xt = static_cast<const T*>(x);
  T* dr = static_cast<T*>(dres);
  const int c = int(C);
  // The reduction for relu (RELU), dres (DRES) and dy2 (DY2, only with
  // dres), as compile-time flags.
  auto reduce = [&](auto relu_flag, auto dres_flag, auto dy2_flag) {
    constexpr bool kDres = decltype(dres_flag)::value, kDy2 = decltype(dy2_flag)::value;
    constexpr auto kernel =
        bn_bwd_reduce_kernel<T, decltype(relu_flag)::value ? kMaskBits : kNoRelu, kDres, kDy2 && kDres>;
    // Every variant split alike (kBwdBlocks a multiprocessor, which each
    // holds by its launch bounds): a gradient given twice sums as the same
    // gradient added first (batch_norm_act_twin, bit for bit).
    return over_rows<kernel>(M, kBwdBlocks, part, stream, dyt, dy2t, mask, relu_coef, xt, save_mean, save_invstd,
                             dr, M, c);
  };
  const Split s = relu_coef ? over_rows<bn_bwd_reduce_kernel<T, kMaskCoef, false, false>>(
                                  M, kBwdBlocks, part, stream, dyt, dy2t, mask, relu_coef, xt, save_mean,
                                  save_invstd, dr, M, c)
                            : with_flags(relu, dres != nullptr, dy2 != nullptr, reduce);
  bn_bwd_finalize_kernel<<<unsigned((C + 31) / 32), dim3(32, kSumLanes), 0, stream>>>(
      part, s.blocks, c, M, w, save_mean, save_invstd, dw, db, coef);
  const int64_t vecs = M * C / kV;
  T* dxt = static_cast<T*>(dx);
  // With a second gradient the second pass reads the masked sum the first
  // wrote as the residual's gradient: one tensor, no mask.
  if (relu_coef)
    over_items<bn_bwd_apply_kernel<T, kMaskCoef, true>, bn_bwd_apply_kernel<T, kMaskCoef, false>>(
        vecs, c, stream, dyt, mask, relu_coef, xt, coef, dxt);
  else if (relu && !dy2)
    over_items<bn_bwd_apply_kernel<T, kMaskBits, true>, bn_bwd_apply_kernel<T, kMaskBits, false>>(
        vecs, c, stream, dyt, mask, relu_coef, xt, coef, dxt);
  else
    over_items<bn_bwd_apply_kernel<T, kNoRelu, true>, bn_bwd_apply_kernel<T, kNoRelu, false>>(
        vecs, c, stream, dy2 ? dr : dyt, mask, relu_coef, xt, coef, dxt);
  return cudaGetLastError();
}

// 16-byte accesses of activations, 32-byte ones of fp32 per-channel vectors.
bool ok_ptrs(std::initializer_list<const void*> acts, std::initializer_list<const void*> floats) {
  for (const void* p : acts)
    if (!aligned(p, 16)) return false;
  for (const void* p : floats)
    if (!aligned(p, 32)) return false;
  return true;
}

}  // namespace

bool bn_act_supports(int64_t C) { return C >= kV && C % kV == 0 && C / kV <= kThreads; }

int64_t bn_act_fwd_scratch(int64_t M, int64_t C) { return split(M).blocks * 3 * C + 2 * C; }
int64_t bn_act_bwd_scratch(int64_t M, int64_t C) { return split(M).blocks * 2 * C + 3 * C; }

cudaError_t bn_act_fwd(const void* x, const void* residual, const float* w, const float* b,
                       float* running_mean, float* running_var, void* y, uint8_t* mask,
                       float* save_mean, float* save_invstd, float* scratch, DType t, int64_t M,
                       int64_t C, float eps, float momentum, bool relu, cudaStream_t stream) {
  if (M <= 0 || !bn_act_supports(C) || (relu && !mask) || t == DType::F32) return cudaErrorInvalidValue;
  if (!ok_ptrs({x, residual, y}, {w, b, save_mean, save_invstd, scratch})) return cudaErrorMisalignedAddress;
  if (t == DType::BF16)
    return fwd<__nv_bfloat16>(x, residual, w, b, running_mean, running_var, y, mask, save_mean,
                              save_invstd, scratch, M, C, eps, momentum, relu, stream);
  return fwd<__half>(x, residual, w, b, running_mean, running_var, y, mask, save_mean, save_invstd,
                     scratch, M, C, eps, momentum, relu, stream);
}

cudaError_t bn_act_bwd(const void* dy, const void* dy2, const uint8_t* mask, const void* x, const float* w,
                       const float* save_mean, const float* save_invstd, void* dx, void* dresidual,
                       float* dw, float* db, float* scratch, DType t, int64_t M, int64_t C, bool relu,
                       cudaStream_t stream) {
  if (M <= 0 || !bn_act_supports(C) || (relu && !mask) || t == DType::F32 || (dy2 && !dresidual))
    return cudaErrorInvalidValue;
  if (!ok_ptrs({dy, dy2, x, dx, dresidual}, {w, save_mean, save_invstd, scratch}))
    return cudaErrorMisalignedAddress;
  if (t == DType::BF16)
    return bwd<__nv_bfloat16>(dy, dy2, mask, nullptr, x, w, save_mean, save_invstd, dx, dresidual, dw, db,
                              scratch, M, C, relu, stream);
  return bwd<__half>(dy, dy2, mask, nullptr, x, w, save_mean, save_invstd, dx, dresidual, dw, db, scratch, M,
                     C, relu, stream);
}

cudaError_t bn_act_bwd_remask(const void* dy, const void* x, const float* relu_coef, const float* w,
                              const float* save_mean, const float* save_invstd, void* dx, float* dw, float* db,
                              float* scratch, DType t, int64_t M, int64_t C, cudaStream_t stream) {
  if (M <= 0 || !bn_act_supports(C) || !relu_coef || t == DType::F32) return cudaErrorInvalidValue;
  if (!ok_ptrs({dy, x, dx}, {relu_coef, w, save_mean, save_invstd, scratch})) return cudaErrorMisalignedAddress;
  if (t == DType::BF16)
    return bwd<__nv_bfloat16>(dy, nullptr, nullptr, relu_coef, x, w, save_mean, save_invstd, dx, nullptr, dw,
                              db, scratch, M, C, true, stream);
  return bwd<__half>(dy, nullptr, nullptr, relu_coef, x, w, save_mean, save_invstd, dx, nullptr, dw, db, scratch,
                     M, C, true, stream);
}

cudaError_t bn_sums_finalize(const float* sum, const float* sqsum, const float* w, const float* b,
                             float* running_mean, float* running_var, float* save_mean,
                             float* save_invstd, float* coef, void* coef16, int64_t M, int64_t C,
                             float eps, float momentum, cudaStream_t stream) {
  if (M <= 0 || C <= 0) return cudaErrorInvalidValue;
  bn_sums_finalize_kernel<<<unsigned((C + 127) / 128), 128, 0, stream>>>(
      sum, sqsum, int(C), M, w, b, eps, momentum, running_mean, running_var, save_mean, save_invstd,
      coef, static_cast<__half*>(coef16));
  return cudaGetLastError();
}

cudaError_t bn_act_apply(const void* x, const void* residual, const float* coef, void* y,
                         uint8_t* mask, DType t, int64_t M, int64_t C, bool relu, cudaStream_t stream) {
  if (M <= 0 || !bn_act_supports(C) || (relu && !mask) || t == DType::F32) return cudaErrorInvalidValue;
  if (!ok_ptrs({x, residual, y}, {coef})) return cudaErrorMisalignedAddress;
  if (t == DType::BF16)
    apply<__nv_bfloat16>(x, residual, coef, y, mask, M, C, relu, stream);
  else
    apply<__half>(x, residual, coef, y, mask, M, C, relu, stream);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace cs
