// layer_norm.cu: LayerNorm over rows of C values with the residual add before
// it fused in, forward and backward; one warp per row, fp32 statistics and
// accumulation. The backward pass writes the input gradient and each block's
// partial weight and bias gradients (in shared memory per warp, in a fixed
// order: deterministic), which column_sum adds up over the blocks. Rows of
// 512, 768 or 1024 (GPT-2's and BERT's widths) take a backward that
// holds the row in registers: every load of a row issued at once, each read
// once (the generic one reads a row twice, a pack at a time: latency-bound).
// Two variants serve BERT's LayerNorms (add_layer_norm.h, kernels "lny" and
// "lnb"): a forward that stores the sum r only in the columns whose x^ the
// output y does not give back (ln_keep.h: |w| < max(|b|, 2^-14)), its backward
// recomputing x^ from the output y, w and b in the others, and a backward
// that also sums the delta's gradient down the columns (the bias gradient of
// the linear layer whose output delta is).
#include <type_traits>

#include "common.cuh"
#include "ln_keep.h"

namespace cs {
namespace cuda {
namespace {

constexpr int kFwdWarps = 8;
constexpr int kSmemBytes = 48 * 1024;  // the backward's per-warp dw/db sums

// The backward's warps per block for rows of C: each warp keeps 2 x C floats
// (3 x C with the delta's sums: bwd_warps_for).
int bwd_warps(int64_t C) {
  const int64_t w = kSmemBytes / (8 * C);
  return int(w > 8 ? 8 : w);
}

// r and x may be the same buffer (no delta): r is re-read by the thread that
// wrote it, so no pointer here is __restrict__. With a delta and no r_out, or
// r_out written only in the kept columns (SPARSE), each pass recomputes the
// sum from x and delta (the rows are still in L1 or L2), rounded to TR as it
// is stored.
template <typename TR, typename TD, int N, bool SPARSE>
__device__ __forceinline__ void load_r(const TR* x, const TD* delta, const TR* r_out, int64_t i,
                                       float (&v)[N]) {
  if (delta && (SPARSE || !r_out)) {
    float d[N];
    load_f<TR, N>(x + i, v);
    load_f<TD, N>(delta + i, d);
#pragma unroll
    for (int k = 0; k < N; k++) v[k] = to_f<TR>(from_f<TR>(v[k] + d[k]));
  } else {
    load_f<TR, N>((delta ? r_out : x) + i, v);
  }
}

// SPARSE ("lny"): r_out (with a delta) written only in the columns
// ln_keeps_r picks.
template <typename TR, typename TD, typename TO, int N, bool SPARSE>
__global__ void __launch_bounds__(kFwdWarps * 32)
    layer_norm_fwd_kernel(const TR* x, const TD* delta, const float* w, const float* b, TR* r_out, TO* y,
                  float* mean_out, float* rstd_out, int64_t rows, int C, float eps) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row = int64_t(blockIdx.x) * kFwdWarps + warp;
  if (row >= rows) return;
  const int64_t off = row * C;
  TR* r_row = r_out ? r_out + off : nullptr;
  float sum = 0.f;
  for (int c = lane * N; c < C; c += 32 * N) {
    float v[N];
    load_f<TR, N>(x + off + c, v);
    if (delta) {
      float d[N];
      load_f<TD, N>(delta + off + c, d);
#pragma unroll
      for (int k = 0; k < N; k++) v[k] = to_f<TR>(from_f<TR>(v[k] + d[k]));  // r as stored
      if (SPARSE && r_row) {
#pragma unroll
        for (int k = 0; k < N; k++)
          if (kern::ln_keeps_r(w[c + k], b[c + k])) r_row[c + k] = from_f<TR>(v[k]);
      } else if (r_row) {
        store_f<TR, N>(r_row + c, v);
      }
    }
#pragma unroll
    for (int k = 0; k < N; k++) sum += v[k];
  }
  const float mean = warp_sum(sum) / float(C);
  float sq = 0.f;
  for (int c = lane * N; c < C; c += 32 * N) {
    float v[N];
    load_r<TR, TD, N, SPARSE>(x + off, delta ? delta + off : nullptr, r_row, c, v);
#pragma unroll
    for (int k = 0; k < N; k++) sq += (v[k] - mean) * (v[k] - mean);
  }
  const float rstd = rsqrtf(warp_sum(sq) / float(C) + eps);
  for (int c = lane * N; c < C; c += 32 * N) {
    float v[N], wv[N], bv[N];
    load_r<TR, TD, N, SPARSE>(x + off, delta ? delta + off : nullptr, r_row, c, v);
    load_f<float, N>(w + c, wv);
    load_f<float, N>(b + c, bv);
#pragma unroll
    for (int k = 0; k < N; k++) v[k] = (v[k] - mean) * rstd * wv[k] + bv[k];
    store_f<TO, N>(y + off + c, v);
  }
  if (lane == 0) {
    mean_out[row] = mean;
    rstd_out[row] = rstd;
  }
}

// Shared-memory slot of column c for the per-warp sums: column c = N j + k
// goes to k (C / N) + j, so that the 32 lanes of a warp hit 32 banks.
template <int N>
__device__ __forceinline__ int slot(int c, int C) {
  return (c % N) * (C / N) + c / N;
}

// The backward's end: the block's warps' S sums of each column (sm
// [warps][S][C], each column at its slot: dw, db and with S = 3 the delta
// gradient's) added in warp order into part [block][S][C].
template <int N>
__device__ void write_partials(const float* sm, int warps, int S, int C, float* part) {
  __syncthreads();
  float* out = part + int64_t(blockIdx.x) * S * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    for (int k = 0; k < S; k++) {
      float a = 0.f;
      for (int i = 0; i < warps; i++) a += sm[(i * S + k) * C + slot<N>(c, C)];
      out[k * C + c] = a;
    }
  }
}

// N values of dy at i, plus dy2's with DY2: the sum rounded to TO, as
// autograd's add of the two gradients rounds it. A template argument, not a
// test of dy2: with a branch in the loads the register-held backward for
// rows of 768 compiled to 96 registers instead of 123, fewer loads in flight
// (suspected of GPT-2's 0.5 ms slower step in the ninth session; the tenth's
// calls did not resolve a difference, docs/perf.md).
template <typename TO, int N, bool DY2>
__device__ __forceinline__ void load_dy(const TO* dy, const TO* dy2, int64_t i, float (&g)[N]) {
  load_f<TO, N>(dy + i, g);
  if (DY2) {
    float g2[N];
    load_f<TO, N>(dy2 + i, g2);
#pragma unroll
    for (int k = 0; k < N; k++) g[k] = to_f<TO>(from_f<TO>(g[k] + g2[k]));
  }
}

// The backward kernels' operands (LnBwd, typed); S = 3 keeps the delta
// gradient's column sums (LnBwd::dsum) beside dw and db.
template <typename TR, typename TD, typename TO>
struct Bwd {
  const TO* dy;
  const TO* dy2;
  const TR* dr;
  const TR* r;
  const TO* y;
  const float* mean;
  const float* rstd;
  const float* w;
  const float* b;
  TR* dx;
  TD* ddelta;
  float* part;
  int64_t rows;
  int C, S;
};

// The row's stored values for x^ at i: r (FROM_Y false) or y (r only in the
// columns ln_keeps_r picks: see xhat).
template <typename TR, typename TD, typename TO, int N, bool FROM_Y>
__device__ __forceinline__ void load_v(const Bwd<TR, TD, TO>& a, int64_t i, float (&v)[N]) {
  if (FROM_Y)
    load_f<TO, N>(a.y + i, v);
  else
    load_f<TR, N>(a.r + i, v);
}

// x^ from r ((r - mean) rstd, v r) or, FROM_Y, from y ((y - b) / w, v y)
// except in the columns ln_keeps_r picks, whose r the forward stored at r[i].
template <bool FROM_Y, typename TR>
__device__ __forceinline__ float xhat(float v, float mu, float rs, float w, float b, const TR* r,
                                      int64_t i) {
  if (!FROM_Y) return (v - mu) * rs;
  if (kern::ln_keeps_r(w, b)) return (to_f<TR>(r[i]) - mu) * rs;
  return (v - b) / w;
}

// The delta gradient d as stored (in TD where ddelta is written apart, else TR).
template <typename TR, typename TD>
__device__ __forceinline__ float as_stored(float d, bool apart) {
  return apart ? to_f<TD>(from_f<TD>(d)) : to_f<TR>(from_f<TR>(d));
}

template <typename TR, typename TD, typename TO, int N, bool DY2, bool FROM_Y>
__global__ void layer_norm_bwd_kernel(const Bwd<TR, TD, TO> a) {
  extern __shared__ float sm[];  // [warps][S][C]: dw, db (and dsum) sums of each warp
  const int C = a.C, S = a.S;
  const int warps = blockDim.x / 32;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int i = threadIdx.x; i < warps * S * C; i += blockDim.x) sm[i] = 0.f;
  __syncthreads();
  float* sdw = sm + warp * S * C;
  float* sdb = sdw + C;
  float* sds = sdb + C;  // S == 3 only
  for (int64_t row = int64_t(blockIdx.x) * warps + warp; row < a.rows;
       row += int64_t(gridDim.x) * warps) {
    const int64_t off = row * C;
    const float mu = a.mean[row], rs = a.rstd[row];
    float sg = 0.f, sgx = 0.f;
    for (int c = lane * N; c < C; c += 32 * N) {
      float g[N], v[N], wv[N], bv[N];
      load_dy<TO, N, DY2>(a.dy, a.dy2, off + c, g);
      load_v<TR, TD, TO, N, FROM_Y>(a, off + c, v);
      load_f<float, N>(a.w + c, wv);
      if (FROM_Y) load_f<float, N>(a.b + c, bv);
#pragma unroll
      for (int k = 0; k < N; k++) {
        const float xh = xhat<FROM_Y>(v[k], mu, rs, wv[k], FROM_Y ? bv[k] : 0.f, a.r, off + c + k);
        const int s = slot<N>(c + k, C);
        sdw[s] += g[k] * xh;
        sdb[s] += g[k];
        const float gw = g[k] * wv[k];
        sg += gw;
        sgx += gw * xh;
      }
    }
    const float mg = warp_sum(sg) / float(C), mgx = warp_sum(sgx) / float(C);
    for (int c = lane * N; c < C; c += 32 * N) {
      float g[N], v[N], wv[N], bv[N];
      load_dy<TO, N, DY2>(a.dy, a.dy2, off + c, g);
      load_v<TR, TD, TO, N, FROM_Y>(a, off + c, v);
      load_f<float, N>(a.w + c, wv);
      if (FROM_Y) load_f<float, N>(a.b + c, bv);
      float d[N];
      if (a.dr)
        load_f<TR, N>(a.dr + off + c, d);
      else
#pragma unroll
        for (int k = 0; k < N; k++) d[k] = 0.f;
#pragma unroll
      for (int k = 0; k < N; k++) {
        const float xh = xhat<FROM_Y>(v[k], mu, rs, wv[k], FROM_Y ? bv[k] : 0.f, a.r, off + c + k);
        d[k] += rs * (g[k] * wv[k] - mg - xh * mgx);
      }
      store_f<TR, N>(a.dx + off + c, d);
      if (a.ddelta) store_f<TD, N>(a.ddelta + off + c, d);
      if (S == 3)
#pragma unroll
        for (int k = 0; k < N; k++) sds[slot<N>(c + k, C)] += as_stored<TR, TD>(d[k], a.ddelta);
    }
  }
  write_partials<N>(sm, warps, S, C, a.part);
}

// The backward of rows of C = ITERS x 256 values: lane l holds columns
// 8 (32 j + l) .. + 7 of the row for j < ITERS in registers. The same sums in
// the same order as layer_norm_bwd_kernel<..., 8> (not necessarily the same
// bits: the compiler may fuse the multiply-adds differently).
template <typename TR, typename TD, typename TO, int ITERS, bool DY2, bool FROM_Y>
__global__ void layer_norm_bwd_reg_kernel(const Bwd<TR, TD, TO> a) {
  constexpr int N = 8, C = ITERS * 32 * N;
  extern __shared__ float sm[];  // [warps][S][C]: dw, db (and dsum) sums of each warp
  const int S = a.S;
  const int warps = blockDim.x / 32;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int i = threadIdx.x; i < warps * S * C; i += blockDim.x) sm[i] = 0.f;
  __syncthreads();
  float* sdw = sm + warp * S * C;
  float* sdb = sdw + C;
  float* sds = sdb + C;  // S == 3 only
  for (int64_t row = int64_t(blockIdx.x) * warps + warp; row < a.rows;
       row += int64_t(gridDim.x) * warps) {
    const int64_t off = row * C;
    float g[ITERS][N], v[ITERS][N], d[ITERS][N];
#pragma unroll
    for (int j = 0; j < ITERS; j++) {
      const int c = (j * 32 + lane) * N;
      load_dy<TO, N, DY2>(a.dy, a.dy2, off + c, g[j]);
      load_v<TR, TD, TO, N, FROM_Y>(a, off + c, v[j]);
      if (a.dr)
        load_f<TR, N>(a.dr + off + c, d[j]);
      else
#pragma unroll
        for (int k = 0; k < N; k++) d[j][k] = 0.f;
    }
    const float mu = a.mean[row], rs = a.rstd[row];
    float sg = 0.f, sgx = 0.f;
#pragma unroll
    for (int j = 0; j < ITERS; j++) {
      const int c = (j * 32 + lane) * N;
      float wv[N], bv[N];
      load_f<float, N>(a.w + c, wv);
      if (FROM_Y) load_f<float, N>(a.b + c, bv);
#pragma unroll
      for (int k = 0; k < N; k++) {
        const float xh = xhat<FROM_Y>(v[j][k], mu, rs, wv[k], FROM_Y ? bv[k] : 0.f, a.r, off + c + k);
        const int s = slot<N>(c + k, C);
        sdw[s] += g[j][k] * xh;
        sdb[s] += g[j][k];
        const float gw = g[j][k] * wv[k];
        sg += gw;
        sgx += gw * xh;
        v[j][k] = xh;
        g[j][k] = gw;
      }
    }
    const float mg = warp_sum(sg) / float(C), mgx = warp_sum(sgx) / float(C);
#pragma unroll
    for (int j = 0; j < ITERS; j++) {
      const int c = (j * 32 + lane) * N;
#pragma unroll
      for (int k = 0; k < N; k++) d[j][k] += rs * (g[j][k] - mg - v[j][k] * mgx);
      store_f<TR, N>(a.dx + off + c, d[j]);
      if (a.ddelta) store_f<TD, N>(a.ddelta + off + c, d[j]);
      if (S == 3)
#pragma unroll
        for (int k = 0; k < N; k++) sds[slot<N>(c + k, C)] += as_stored<TR, TD>(d[j][k], a.ddelta);
    }
  }
  write_partials<N>(sm, warps, S, C, a.part);
}

template <typename TR, typename TD, typename TO>
bool vec_ok(int64_t C, std::initializer_list<const void*> ps) {
  constexpr int N = 8;
  if (C % N) return false;
  for (const void* p : ps)
    if (!aligned(p, 32)) return false;  // N floats; N halfs need 16 only
  return true;
}

template <typename TR, typename TD, typename TO>
cudaError_t fwd(const void* x, const void* delta, const float* w, const float* b, void* r_out,
                void* y, float* mean, float* rstd, int64_t rows, int64_t C, float eps, bool sparse,
                cudaStream_t stream) {
  const unsigned grid = unsigned((rows + kFwdWarps - 1) / kFwdWarps);
  auto args = [&](auto kernel) {
    kernel<<<grid, kFwdWarps * 32, 0, stream>>>(
        static_cast<const TR*>(x), static_cast<const TD*>(delta), w, b, static_cast<TR*>(r_out),
        static_cast<TO*>(y), mean, rstd, rows, int(C), eps);
  };
  const bool vec = vec_ok<TR, TD, TO>(C, {x, delta, w, b, r_out, y});
  if (sparse && delta && r_out)
    args(vec ? layer_norm_fwd_kernel<TR, TD, TO, 8, true> : layer_norm_fwd_kernel<TR, TD, TO, 1, true>);
  else
    args(vec ? layer_norm_fwd_kernel<TR, TD, TO, 8, false> : layer_norm_fwd_kernel<TR, TD, TO, 1, false>);
  return cudaGetLastError();
}

// The backward's warps per block with S sums per column: bwd_warps(C) (the
// occupancy of the two-sum kernels), fewer where S sums of that many warps
// would not fit a block's shared memory.
int bwd_warps_for(int64_t C, int S, size_t& smem) {
  int warps = bwd_warps(C);
  const int64_t most = smem_per_block_optin() / (int64_t(S) * C * int64_t(sizeof(float)));
  if (warps > most) warps = int(most);
  smem = size_t(warps) * size_t(S) * size_t(C) * sizeof(float);
  return warps;
}

template <typename TR, typename TD, typename TO>
cudaError_t bwd(const LnBwd& p, int64_t rows, int64_t C, cudaStream_t stream) {
  const int S = p.dsum ? 3 : 2;
  size_t smem = 0;
  const int warps = bwd_warps_for(C, S, smem);
  if (warps < 1) return cudaErrorInvalidValue;
  const int64_t need = (rows + warps - 1) / warps, cap = int64_t(sm_count()) * 2;
  const int64_t blocks = need < cap ? need : cap;
  const Bwd<TR, TD, TO> a{static_cast<const TO*>(p.dy), static_cast<const TO*>(p.dy2),
                          static_cast<const TR*>(p.dr), static_cast<const TR*>(p.r),
                          static_cast<const TO*>(p.y),  p.mean,
                          p.rstd,                       p.w,
                          p.b,                          static_cast<TR*>(p.dx),
                          static_cast<TD*>(p.ddelta),   p.scratch,
                          rows,                         int(C),
                          S};
  cudaError_t e = cudaSuccess;
  auto launch = [&](auto kernel) {
    if (smem > size_t(48 * 1024))
      e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
    if (e == cudaSuccess) kernel<<<unsigned(blocks), warps * 32, smem, stream>>>(a);
  };
  auto pick = [&](auto dy2_given, auto from_y) {
    constexpr bool DY2 = decltype(dy2_given)::value, FROM_Y = decltype(from_y)::value;
    if (!vec_ok<TR, TD, TO>(C, {p.dy, p.dy2, p.dr, p.r, p.y, p.w, p.b, p.dx, p.ddelta}))
      launch(layer_norm_bwd_kernel<TR, TD, TO, 1, DY2, FROM_Y>);
    else if (C == 512)
      launch(layer_norm_bwd_reg_kernel<TR, TD, TO, 2, DY2, FROM_Y>);
    else if (C == 768)
      launch(layer_norm_bwd_reg_kernel<TR, TD, TO, 3, DY2, FROM_Y>);
    else if (C == 1024)
      launch(layer_norm_bwd_reg_kernel<TR, TD, TO, 4, DY2, FROM_Y>);
    else
      launch(layer_norm_bwd_kernel<TR, TD, TO, 8, DY2, FROM_Y>);
  };
  const bool from_y = p.y != nullptr;
  if (p.dy2 && from_y)
    pick(std::true_type{}, std::true_type{});
  else if (p.dy2)
    pick(std::true_type{}, std::false_type{});
  else if (from_y)
    pick(std::false_type{}, std::true_type{});
  else
    pick(std::false_type{}, std::false_type{});
  if (e != cudaSuccess) return e;
  e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  // part [block][S][C]: dw, then db and (S = 3) dsum.
  if (S == 2) return column_sum(p.scratch, blocks, 2 * C, p.dw, C, p.db, stream);
  return column_sum3(p.scratch, blocks, 3 * C, p.dw, C, p.db, 2 * C, p.dsum, stream);
}

}  // namespace

bool layer_norm_supports(int64_t C) { return C >= 1 && bwd_warps(C) >= 1; }

int64_t layer_norm_bwd_scratch(int64_t rows, int64_t C) {
  if (rows <= 0 || !layer_norm_supports(C)) return 0;
  const int64_t cap = int64_t(sm_count()) * 2;  // bwd's blocks, with 3 sums a column at most
  return (rows < cap ? rows : cap) * 3 * C;
}

// The (residual, delta, output) dtypes the kernels are built for: output bf16
// or fp16, residual fp32 or the output's, delta the residual's or the output's.
#define CS_DISPATCH_LN(tr, td, to, FN, ...)                                          \
  do {                                                                               \
    if (to == DType::BF16) {                                                         \
      using O = __nv_bfloat16;                                                       \
      if (tr == DType::F32 && td == DType::F32) return FN<float, float, O>(__VA_ARGS__); \
      if (tr == DType::F32 && td == to) return FN<float, O, O>(__VA_ARGS__);         \
      if (tr == to && td == to) return FN<O, O, O>(__VA_ARGS__);                     \
    } else if (to == DType::F16) {                                                   \
      using O = __half;                                                              \
      if (tr == DType::F32 && td == DType::F32) return FN<float, float, O>(__VA_ARGS__); \
      if (tr == DType::F32 && td == to) return FN<float, O, O>(__VA_ARGS__);         \
      if (tr == to && td == to) return FN<O, O, O>(__VA_ARGS__);                     \
    }                                                                                \
    return cudaErrorInvalidValue;                                                    \
  } while (0)

bool layer_norm_dtypes(DType tr, DType td, DType to) {
  return (to == DType::BF16 || to == DType::F16) &&
         ((tr == DType::F32 && (td == DType::F32 || td == to)) || (tr == to && td == to));
}

cudaError_t layer_norm_fwd(const void* x, const void* delta, const float* w, const float* b,
                           void* r_out, void* y, float* mean, float* rstd, DType tr, DType td,
                           DType to, int64_t rows, int64_t C, float eps, bool r_sparse,
                           cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (rows < 0 || !layer_norm_supports(C)) return cudaErrorInvalidValue;
  if (!delta) td = tr;  // unused
  CS_DISPATCH_LN(tr, td, to, fwd, x, delta, w, b, r_out, y, mean, rstd, rows, C, eps, r_sparse, stream);
}

cudaError_t layer_norm_bwd(const LnBwd& a, DType tr, DType td, DType to, int64_t rows, int64_t C,
                           cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (rows < 0 || !layer_norm_supports(C) || !a.dy || !a.rstd || !a.w || !a.dx || !a.dw || !a.db ||
      !a.scratch || !a.r || !a.mean || (a.y && !a.b))
    return cudaErrorInvalidValue;
  if (!a.ddelta) td = tr;  // unused
  CS_DISPATCH_LN(tr, td, to, bwd, a, rows, C, stream);
}

}  // namespace cuda
}  // namespace cs
