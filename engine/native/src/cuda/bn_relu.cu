// bn_relu.cu: training-mode batch norm over channels_last activations ([M =
// N H W rows, C channels]) with the residual add and the ReLU after it fused
// in, forward and backward. Each thread owns 8 consecutive channels (one
// 16-byte access of bf16/fp16) of some rows; statistics are Welford sums in
// fp32 per thread, combined with Chan's formula across the threads of a block
// and then across blocks, all in a fixed order (deterministic). The ReLU's
// backward reads a bit mask (1 bit per element) written by the forward pass.
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

// Rows per block and blocks of the reductions over M rows: one wave of
// per_sm blocks a multiprocessor. The scratch is laid out for kMaxPerSm.
constexpr int kMaxPerSm = 4;
struct Split {
  int64_t rows_per_block, blocks;
};
Split split(int64_t M, int per_sm = kMaxPerSm) {
  const int64_t cap = int64_t(sm_count()) * per_sm;
  int64_t blocks = M < cap ? M : cap;
  if (blocks < 1) blocks = 1;
  const int64_t rpb = (M + blocks - 1) / blocks;
  return {rpb, (M + rpb - 1) / rpb};
}

// Blocks of kThreads running Kernel that one multiprocessor holds at once
// (its registers decide: the backward's reduction at 77 registers holds 3,
// so a grid of 4 a multiprocessor ran in two waves, the second a quarter
// full), at most kMaxPerSm; computed once per kernel.
template <auto Kernel>
int resident_blocks() {
  static const int n = [] {
    int b = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, Kernel, kThreads, 0) != cudaSuccess) b = 1;
    return b < 1 ? 1 : (b > kMaxPerSm ? kMaxPerSm : b);
  }();
  return n;
}

// Kernel over M rows as one wave of its resident blocks: launched with
// args..., then the rows per block and part; returns the split it ran with.
template <auto Kernel, typename... A>
Split over_rows(int64_t M, float* part, cudaStream_t stream, A... args) {
  const Split s = split(M, resident_blocks<Kernel>());
  Kernel<<<unsigned(s.blocks), kThreads, 0, stream>>>(args..., s.rows_per_block, part);
  return s;
}

// Chan et al.'s combination of (n, mean, m2) with (nb, mb, m2b).
__device__ __forceinline__ void chan(float& n, float& mean, float& m2, float nb, float mb, float m2b) {
  if (nb == 0.f) return;
  const float t = n + nb, d = mb - mean;
  mean += d * (nb / t);
  m2 += m2b + d * d * (n * nb / t);
  n = t;
}

// Per block: the Welford sums of its rows per channel -> part [block][3][C]
// (count, mean, m2).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    bn_fwd_stats_kernel(const T* __restrict__ x, int64_t M, int C, int64_t rows_per_block,
                 float* __restrict__ part) {
  __shared__ float s_mean[kThreads * kV], s_m2[kThreads * kV], s_n[kThreads];
  const int L = C / kV, R = kThreads / L;
  const int cg = threadIdx.x % L, rl = threadIdx.x / L;
  const int64_t r0 = int64_t(blockIdx.x) * rows_per_block;
  const int64_t r1 = r0 + rows_per_block < M ? r0 + rows_per_block : M;
  float n = 0.f, mean[kV], m2[kV];
#pragma unroll
  for (int k = 0; k < kV; k++) mean[k] = m2[k] = 0.f;
  if (rl < R) {
#pragma unroll 4
    for (int64_t r = r0 + rl; r < r1; r += R) {  // unrolled: loads of several rows in flight
      float v[kV];
      load_f<T, kV>(x + r * C + cg * kV, v);
      n += 1.f;
      const float inv = 1.f / n;
#pragma unroll
      for (int k = 0; k < kV; k++) {
        const float d = v[k] - mean[k];
        mean[k] += d * inv;
        m2[k] += d * (v[k] - mean[k]);
      }
    }
#pragma unroll
    for (int k = 0; k < kV; k++) {
      s_mean[rl * C + cg * kV + k] = mean[k];
      s_m2[rl * C + cg * kV + k] = m2[k];
    }
    if (cg == 0) s_n[rl] = n;
  }
  __syncthreads();
  if (rl != 0) return;
  for (int k = 0; k < kV; k++) {
    const int c = cg * kV + k;
    float tn = s_n[0], tm = s_mean[c], t2 = s_m2[c];
    for (int i = 1; i < R; i++) chan(tn, tm, t2, s_n[i], s_mean[i * C + c], s_m2[i * C + c]);
    float* out = part + int64_t(blockIdx.x) * 3 * C;
    out[c] = tn;
    out[C + c] = tm;
    out[2 * C + c] = t2;
  }
}

// Per channel: the blocks' partials combined (kSumLanes lanes, each over every
// kSumLanes-th block in order, then the lanes in a fixed tree); mean, invstd,
// the running statistics (momentum, unbiased variance), and the affine
// transform as scale = w invstd, shift = b - mean scale.
__global__ void __launch_bounds__(32 * kSumLanes)
    bn_fwd_finalize_kernel(const float* __restrict__ part, int64_t blocks, int C, int64_t M,
                          const float* __restrict__ w, const float* __restrict__ b, float eps,
                          float momentum, float* running_mean, float* running_var,
                          float* __restrict__ save_mean, float* __restrict__ save_invstd,
                          float* __restrict__ scale, float* __restrict__ shift) {
  __shared__ float sn[kSumLanes][32], sm[kSumLanes][32], s2[kSumLanes][32];
  const int x = threadIdx.x, lane = threadIdx.y;
  const int c = blockIdx.x * 32 + x;
  float n = 0.f, mean = 0.f, m2 = 0.f;
  if (c < C) {
#pragma unroll 4
    for (int64_t i = lane; i < blocks; i += kSumLanes) {
      const float* p = part + i * 3 * C;
      chan(n, mean, m2, p[c], p[C + c], p[2 * C + c]);
    }
  }
  sn[lane][x] = n;
  sm[lane][x] = mean;
  s2[lane][x] = m2;
  __syncthreads();
  for (int half = kSumLanes / 2; half > 0; half /= 2) {  // lane l takes in lane l + half
    if (lane < half) {
      float tn = sn[lane][x], tm = sm[lane][x], t2 = s2[lane][x];
      chan(tn, tm, t2, sn[lane + half][x], sm[lane + half][x], s2[lane + half][x]);
      sn[lane][x] = tn;
      sm[lane][x] = tm;
      s2[lane][x] = t2;
    }
    __syncthreads();
  }
  if (lane != 0 || c >= C) return;
  n = sn[0][x];
  mean = sm[0][x];
  m2 = s2[0][x];
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

// y = relu?(x scale + shift (+ residual)); mask bit k of byte (row, group) is
// y > 0 for channel 8 group + k.
template <typename T, bool RES, bool RELU>
__global__ void __launch_bounds__(kThreads)
    bn_fwd_apply_kernel(const T* __restrict__ x, const T* __restrict__ res, const float* __restrict__ scale,
                 const float* __restrict__ shift, T* __restrict__ y, uint8_t* __restrict__ mask,
                 int64_t vecs, int C) {
  const int L = C / kV;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < vecs;
       i += int64_t(gridDim.x) * kThreads) {
    const int cg = int(i % L);
    float v[kV], sc[kV], sh[kV];
    load_f<T, kV>(x + i * kV, v);
    load_f<float, kV>(scale + cg * kV, sc);
    load_f<float, kV>(shift + cg * kV, sh);
#pragma unroll
    for (int k = 0; k < kV; k++) v[k] = v[k] * sc[k] + sh[k];
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

// Per block: sums over its rows of g and g xhat per channel (g = dy, plus dy2
// where given, masked by the ReLU), -> part [block][2][C]; with DRES also
// writes g as the residual's gradient.
template <typename T, bool RELU, bool DRES>
__global__ void __launch_bounds__(kThreads)
    bn_bwd_reduce_kernel(const T* __restrict__ dy, const T* __restrict__ dy2,
                      const uint8_t* __restrict__ mask,
                      const T* __restrict__ x, const float* __restrict__ save_mean,
                      const float* __restrict__ save_invstd, T* __restrict__ dres, int64_t M, int C,
                      int64_t rows_per_block, float* __restrict__ part) {
  __shared__ float s_g[kThreads * kV], s_gx[kThreads * kV];
  const int L = C / kV, R = kThreads / L;
  const int cg = threadIdx.x % L, rl = threadIdx.x / L;
  const int64_t r0 = int64_t(blockIdx.x) * rows_per_block;
  const int64_t r1 = r0 + rows_per_block < M ? r0 + rows_per_block : M;
  float sg[kV], sgx[kV];
#pragma unroll
  for (int k = 0; k < kV; k++) sg[k] = sgx[k] = 0.f;
  if (rl < R) {
    float mu[kV], is[kV];
    load_f<float, kV>(save_mean + cg * kV, mu);
    load_f<float, kV>(save_invstd + cg * kV, is);
#pragma unroll 4
    for (int64_t r = r0 + rl; r < r1; r += R) {
      const int64_t off = r * C + cg * kV;
      float g[kV], v[kV];
      load_f<T, kV>(dy + off, g);
      load_f<T, kV>(x + off, v);
      if (dy2) {  // the sum rounded to T, as a separate add rounds it
        float g2[kV];
        load_f<T, kV>(dy2 + off, g2);
#pragma unroll
        for (int k = 0; k < kV; k++) g[k] = to_f<T>(from_f<T>(g[k] + g2[k]));
      }
      if (RELU) {
        const unsigned bits = mask[off / kV];
#pragma unroll
        for (int k = 0; k < kV; k++) g[k] = (bits >> k) & 1u ? g[k] : 0.f;
      }
      if (DRES) store_f<T, kV>(dres + off, g);
#pragma unroll
      for (int k = 0; k < kV; k++) {
        sg[k] += g[k];
        sgx[k] += g[k] * (v[k] - mu[k]) * is[k];
      }
    }
#pragma unroll
    for (int k = 0; k < kV; k++) {
      s_g[rl * C + cg * kV + k] = sg[k];
      s_gx[rl * C + cg * kV + k] = sgx[k];
    }
  }
  __syncthreads();
  if (rl != 0) return;
  for (int k = 0; k < kV; k++) {
    const int c = cg * kV + k;
    float a = 0.f, bb = 0.f;
    for (int i = 0; i < R; i++) {
      a += s_g[i * C + c];
      bb += s_gx[i * C + c];
    }
    float* out = part + int64_t(blockIdx.x) * 2 * C;
    out[c] = a;
    out[C + c] = bb;
  }
}

// Per channel: dbias = sum g, dweight = sum g xhat (over the blocks'
// partials: kSumLanes lanes in order, then the lanes in a fixed tree) and the
// coefficients of dx = k1 g - kb - (x - mean) kx: k1 = w invstd,
// kb = k1 dbias / M, kx = k1 invstd dweight / M.
__global__ void __launch_bounds__(32 * kSumLanes)
    bn_bwd_finalize_kernel(const float* __restrict__ part, int64_t blocks, int C, int64_t M,
                        const float* __restrict__ w, const float* __restrict__ save_invstd,
                        float* __restrict__ dw, float* __restrict__ db, float* __restrict__ coef) {
  __shared__ float sa[kSumLanes][32], sb[kSumLanes][32];
  const int x = threadIdx.x, lane = threadIdx.y;
  const int c = blockIdx.x * 32 + x;
  float a = 0.f, bb = 0.f;
  if (c < C) {
#pragma unroll 4
    for (int64_t i = lane; i < blocks; i += kSumLanes) {
      a += part[i * 2 * C + c];
      bb += part[i * 2 * C + C + c];
    }
  }
  sa[lane][x] = a;
  sb[lane][x] = bb;
  __syncthreads();
  for (int half = kSumLanes / 2; half > 0; half /= 2) {
    if (lane < half) {
      sa[lane][x] += sa[lane + half][x];
      sb[lane][x] += sb[lane + half][x];
    }
    __syncthreads();
  }
  if (lane != 0 || c >= C) return;
  a = sa[0][x];
  bb = sb[0][x];
  db[c] = a;
  dw[c] = bb;
  const float is = save_invstd[c], k1 = w[c] * is;
  coef[c] = k1;
  coef[C + c] = k1 * a / float(M);
  coef[2 * C + c] = k1 * is * bb / float(M);
}

template <typename T, bool RELU>
__global__ void __launch_bounds__(kThreads)
    bn_bwd_apply_kernel(const T* __restrict__ dy, const uint8_t* __restrict__ mask,
                     const T* __restrict__ x, const float* __restrict__ save_mean,
                     const float* __restrict__ coef, T* __restrict__ dx, int64_t vecs, int C) {
  const int L = C / kV;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < vecs;
       i += int64_t(gridDim.x) * kThreads) {
    const int c0 = int(i % L) * kV;
    float g[kV], v[kV], mu[kV], k1[kV], kb[kV], kx[kV];
    load_f<T, kV>(dy + i * kV, g);
    load_f<T, kV>(x + i * kV, v);
    load_f<float, kV>(save_mean + c0, mu);
    load_f<float, kV>(coef + c0, k1);
    load_f<float, kV>(coef + C + c0, kb);
    load_f<float, kV>(coef + 2 * C + c0, kx);
    const unsigned bits = RELU ? mask[i] : 0xffu;
#pragma unroll
    for (int k = 0; k < kV; k++) {
      const float gk = (bits >> k) & 1u ? g[k] : 0.f;
      v[k] = k1[k] * gk - kb[k] - (v[k] - mu[k]) * kx[k];
    }
    store_f<T, kV>(dx + i * kV, v);
  }
}

template <typename T>
cudaError_t fwd(const void* x, const void* res, const float* w, const float* b, float* rm,
                float* rv, void* y, uint8_t* mask, float* save_mean, float* save_invstd,
                float* scratch, int64_t M, int64_t C, float eps, float momentum, bool relu,
                cudaStream_t stream) {
  float* part = scratch;                                // [blocks][3][C]
  float* scale = scratch + split(M).blocks * 3 * C;     // [C]
  float* shift = scale + C;                             // [C]
  const T* xt = static_cast<const T*>(x);
  const Split s = over_rows<bn_fwd_stats_kernel<T>>(M, part, stream, xt, M, int(C));
  bn_fwd_finalize_kernel<<<unsigned((C + 31) / 32), dim3(32, kSumLanes), 0, stream>>>(
      part, s.blocks, int(C), M, w, b, eps, momentum, rm, rv, save_mean, save_invstd, scale, shift);
  const int64_t vecs = M * C / kV;
  const unsigned grid = grid_stride_blocks(vecs, kThreads);
  const T* rt = static_cast<const T*>(res);
  T* yt = static_cast<T*>(y);
  if (res && relu)
    bn_fwd_apply_kernel<T, true, true><<<grid, kThreads, 0, stream>>>(xt, rt, scale, shift, yt, mask, vecs, int(C));
  else if (res)
    bn_fwd_apply_kernel<T, true, false><<<grid, kThreads, 0, stream>>>(xt, rt, scale, shift, yt, mask, vecs, int(C));
  else if (relu)
    bn_fwd_apply_kernel<T, false, true><<<grid, kThreads, 0, stream>>>(xt, rt, scale, shift, yt, mask, vecs, int(C));
  else
    bn_fwd_apply_kernel<T, false, false><<<grid, kThreads, 0, stream>>>(xt, rt, scale, shift, yt, mask, vecs, int(C));
  return cudaGetLastError();
}

template <typename T>
cudaError_t bwd(const void* dy, const void* dy2, const uint8_t* mask, const void* x, const float* w,
                const float* save_mean, const float* save_invstd, void* dx, void* dres, float* dw,
                float* db, float* scratch, int64_t M, int64_t C, bool relu, cudaStream_t stream) {
  float* part = scratch;                             // [blocks][2][C]
  float* coef = scratch + split(M).blocks * 2 * C;   // [3][C]
  const T* dyt = static_cast<const T*>(dy);
  const T* dy2t = static_cast<const T*>(dy2);
  const T* xt = static_cast<const T*>(x);
  T* dr = static_cast<T*>(dres);
  const int c = int(C);
  // The reduction for relu (RELU) and dres (DRES), as compile-time flags.
  auto reduce = [&](auto relu_flag, auto dres_flag) {
    constexpr auto kernel = bn_bwd_reduce_kernel<T, decltype(relu_flag)::value, decltype(dres_flag)::value>;
    return over_rows<kernel>(M, part, stream, dyt, dy2t, mask, xt, save_mean, save_invstd, dr, M, c);
  };
  const std::true_type yes;
  const std::false_type no;
  const Split s = relu ? (dres ? reduce(yes, yes) : reduce(yes, no))
                       : (dres ? reduce(no, yes) : reduce(no, no));
  bn_bwd_finalize_kernel<<<unsigned((C + 31) / 32), dim3(32, kSumLanes), 0, stream>>>(
      part, s.blocks, c, M, w, save_invstd, dw, db, coef);
  const int64_t vecs = M * C / kV;
  const unsigned grid = grid_stride_blocks(vecs, kThreads);
  // With a second gradient the second pass reads the masked sum the first
  // wrote as the residual's gradient: one tensor, no mask.
  if (dy2)
    bn_bwd_apply_kernel<T, false><<<grid, kThreads, 0, stream>>>(dr, mask, xt, save_mean, coef, static_cast<T*>(dx), vecs, c);
  else if (relu)
    bn_bwd_apply_kernel<T, true><<<grid, kThreads, 0, stream>>>(dyt, mask, xt, save_mean, coef, static_cast<T*>(dx), vecs, c);
  else
    bn_bwd_apply_kernel<T, false><<<grid, kThreads, 0, stream>>>(dyt, mask, xt, save_mean, coef, static_cast<T*>(dx), vecs, c);
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
    return bwd<__nv_bfloat16>(dy, dy2, mask, x, w, save_mean, save_invstd, dx, dresidual, dw, db,
                              scratch, M, C, relu, stream);
  return bwd<__half>(dy, dy2, mask, x, w, save_mean, save_invstd, dx, dresidual, dw, db, scratch, M,
                     C, relu, stream);
}

}  // namespace cuda
}  // namespace cs
