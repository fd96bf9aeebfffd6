// layer_norm.cu: LayerNorm over rows of C values with the residual add before
// it fused in, forward and backward; one warp per row, fp32 statistics and
// accumulation. The backward pass writes the input gradient and each block's
// partial weight and bias gradients (in shared memory per warp, in a fixed
// order: deterministic), which column_sum adds up over the blocks. Rows of
// 512, 768 or 1024 (GPT-2's and BERT's widths) take a backward that
// holds the row in registers: every load of a row issued at once, each read
// once (the generic one reads a row twice, a pack at a time: latency-bound).
#include <type_traits>

#include "common.cuh"

namespace cs {
namespace cuda {
namespace {

constexpr int kFwdWarps = 8;
constexpr int kSmemBytes = 48 * 1024;  // the backward's per-warp dw/db sums

// The backward's warps per block for rows of C: each warp keeps 2 x C floats.
int bwd_warps(int64_t C) {
  const int64_t w = kSmemBytes / (8 * C);
  return int(w > 8 ? 8 : w);
}

int64_t bwd_blocks(int64_t rows, int64_t C) {
  const int w = bwd_warps(C);
  const int64_t need = (rows + w - 1) / w;
  const int64_t cap = int64_t(sm_count()) * 2;
  return need < cap ? need : cap;
}

// r and x may be the same buffer (no delta): r is re-read by the thread that
// wrote it, so no pointer here is __restrict__.
template <typename TR, typename TD, typename TO, int N>
__global__ void __launch_bounds__(kFwdWarps * 32)
    layer_norm_fwd_kernel(const TR* x, const TD* delta, const float* w, const float* b, TR* r_out, TO* y,
                  float* mean_out, float* rstd_out, int64_t rows, int C, float eps) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row = int64_t(blockIdx.x) * kFwdWarps + warp;
  if (row >= rows) return;
  const int64_t off = row * C;
  const TR* r = delta ? r_out + off : x + off;
  float sum = 0.f;
  for (int c = lane * N; c < C; c += 32 * N) {
    float v[N];
    load_f<TR, N>(x + off + c, v);
    if (delta) {
      float d[N];
      load_f<TD, N>(delta + off + c, d);
#pragma unroll
      for (int k = 0; k < N; k++) v[k] = to_f<TR>(from_f<TR>(v[k] + d[k]));  // r as stored
      store_f<TR, N>(r_out + off + c, v);
    }
#pragma unroll
    for (int k = 0; k < N; k++) sum += v[k];
  }
  const float mean = warp_sum(sum) / float(C);
  float sq = 0.f;
  for (int c = lane * N; c < C; c += 32 * N) {
    float v[N];
    load_f<TR, N>(r + c, v);
#pragma unroll
    for (int k = 0; k < N; k++) sq += (v[k] - mean) * (v[k] - mean);
  }
  const float rstd = rsqrtf(warp_sum(sq) / float(C) + eps);
  for (int c = lane * N; c < C; c += 32 * N) {
    float v[N], wv[N], bv[N];
    load_f<TR, N>(r + c, v);
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

// The backward's end: the block's warps' dw, db sums (sm [warps][2][C], each
// column at its slot) added in warp order into part [block][2][C].
template <int N>
__device__ void write_partials(const float* sm, int warps, int C, float* part) {
  __syncthreads();
  float* out = part + int64_t(blockIdx.x) * 2 * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float a = 0.f, bb = 0.f;
    for (int i = 0; i < warps; i++) {
      a += sm[i * 2 * C + slot<N>(c, C)];
      bb += sm[i * 2 * C + C + slot<N>(c, C)];
    }
    out[c] = a;
    out[C + c] = bb;
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

template <typename TR, typename TD, typename TO, int N, bool DY2>
__global__ void layer_norm_bwd_kernel(const TO* dy, const TO* dy2, const TR* dr, const TR* r,
                                      const float* mean, const float* rstd, const float* w, TR* dx,
                                      TD* ddelta, float* part, int64_t rows, int C) {
  extern __shared__ float sm[];  // [warps][2][C]: dw, db sums of each warp
  const int warps = blockDim.x / 32;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int i = threadIdx.x; i < warps * 2 * C; i += blockDim.x) sm[i] = 0.f;
  __syncthreads();
  float* sdw = sm + warp * 2 * C;
  float* sdb = sdw + C;
  for (int64_t row = int64_t(blockIdx.x) * warps + warp; row < rows;
       row += int64_t(gridDim.x) * warps) {
    const int64_t off = row * C;
    const float mu = mean[row], rs = rstd[row];
    float sg = 0.f, sgx = 0.f;
    for (int c = lane * N; c < C; c += 32 * N) {
      float g[N], v[N], wv[N];
      load_dy<TO, N, DY2>(dy, dy2, off + c, g);
      load_f<TR, N>(r + off + c, v);
      load_f<float, N>(w + c, wv);
#pragma unroll
      for (int k = 0; k < N; k++) {
        const float xh = (v[k] - mu) * rs;
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
      float g[N], v[N], wv[N];
      load_dy<TO, N, DY2>(dy, dy2, off + c, g);
      load_f<TR, N>(r + off + c, v);
      load_f<float, N>(w + c, wv);
      float d[N];
      if (dr)
        load_f<TR, N>(dr + off + c, d);
      else
#pragma unroll
        for (int k = 0; k < N; k++) d[k] = 0.f;
#pragma unroll
      for (int k = 0; k < N; k++) {
        const float xh = (v[k] - mu) * rs;
        d[k] += rs * (g[k] * wv[k] - mg - xh * mgx);
      }
      store_f<TR, N>(dx + off + c, d);
      if (ddelta) store_f<TD, N>(ddelta + off + c, d);
    }
  }
  write_partials<N>(sm, warps, C, part);
}

// The backward of rows of C = ITERS x 256 values: lane l holds columns
// 8 (32 j + l) .. + 7 of the row for j < ITERS in registers. The same sums in
// the same order as layer_norm_bwd_kernel<..., 8> (not necessarily the same
// bits: the compiler may fuse the multiply-adds differently).
template <typename TR, typename TD, typename TO, int ITERS, bool DY2>
__global__ void layer_norm_bwd_reg_kernel(const TO* dy, const TO* dy2, const TR* dr, const TR* r,
                                          const float* mean, const float* rstd, const float* w,
                                          TR* dx, TD* ddelta, float* part, int64_t rows) {
  constexpr int N = 8, C = ITERS * 32 * N;
  extern __shared__ float sm[];  // [warps][2][C]: dw, db sums of each warp
  const int warps = blockDim.x / 32;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int i = threadIdx.x; i < warps * 2 * C; i += blockDim.x) sm[i] = 0.f;
  __syncthreads();
  float* sdw = sm + warp * 2 * C;
  float* sdb = sdw + C;
  for (int64_t row = int64_t(blockIdx.x) * warps + warp; row < rows;
       row += int64_t(gridDim.x) * warps) {
    const int64_t off = row * C;
    float g[ITERS][N], v[ITERS][N], d[ITERS][N];
#pragma unroll
    for (int j = 0; j < ITERS; j++) {
      const int c = (j * 32 + lane) * N;
      load_dy<TO, N, DY2>(dy, dy2, off + c, g[j]);
      load_f<TR, N>(r + off + c, v[j]);
      if (dr)
        load_f<TR, N>(dr + off + c, d[j]);
      else
#pragma unroll
        for (int k = 0; k < N; k++) d[j][k] = 0.f;
    }
    const float mu = mean[row], rs = rstd[row];
    float sg = 0.f, sgx = 0.f;
#pragma unroll
    for (int j = 0; j < ITERS; j++) {
      const int c = (j * 32 + lane) * N;
      float wv[N];
      load_f<float, N>(w + c, wv);
#pragma unroll
      for (int k = 0; k < N; k++) {
        const float xh = (v[j][k] - mu) * rs;
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
      store_f<TR, N>(dx + off + c, d[j]);
      if (ddelta) store_f<TD, N>(ddelta + off + c, d[j]);
    }
  }
  write_partials<N>(sm, warps, C, part);
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
                void* y, float* mean, float* rstd, int64_t rows, int64_t C, float eps,
                cudaStream_t stream) {
  const unsigned grid = unsigned((rows + kFwdWarps - 1) / kFwdWarps);
  auto args = [&](auto kernel) {
    kernel<<<grid, kFwdWarps * 32, 0, stream>>>(
        static_cast<const TR*>(x), static_cast<const TD*>(delta), w, b, static_cast<TR*>(r_out),
        static_cast<TO*>(y), mean, rstd, rows, int(C), eps);
  };
  if (vec_ok<TR, TD, TO>(C, {x, delta, w, b, r_out, y}))
    args(layer_norm_fwd_kernel<TR, TD, TO, 8>);
  else
    args(layer_norm_fwd_kernel<TR, TD, TO, 1>);
  return cudaGetLastError();
}

template <typename TR, typename TD, typename TO>
cudaError_t bwd(const void* dy, const void* dy2, const void* dr, const void* r, const float* mean,
                const float* rstd, const float* w, void* dx, void* ddelta, float* dw, float* db,
                float* scratch, int64_t rows, int64_t C, cudaStream_t stream) {
  const int warps = bwd_warps(C);
  const int64_t blocks = bwd_blocks(rows, C);
  const size_t smem = size_t(warps) * 2 * size_t(C) * sizeof(float);
  auto args = [&](auto kernel) {
    kernel<<<unsigned(blocks), warps * 32, smem, stream>>>(
        static_cast<const TO*>(dy), static_cast<const TO*>(dy2), static_cast<const TR*>(dr),
        static_cast<const TR*>(r), mean,
        rstd, w, static_cast<TR*>(dx), static_cast<TD*>(ddelta), scratch, rows, int(C));
  };
  auto reg_args = [&](auto kernel) {
    kernel<<<unsigned(blocks), warps * 32, smem, stream>>>(
        static_cast<const TO*>(dy), static_cast<const TO*>(dy2), static_cast<const TR*>(dr),
        static_cast<const TR*>(r), mean,
        rstd, w, static_cast<TR*>(dx), static_cast<TD*>(ddelta), scratch, rows);
  };
  auto pick = [&](auto dy2_given) {
    constexpr bool DY2 = decltype(dy2_given)::value;
    if (!vec_ok<TR, TD, TO>(C, {dy, dy2, dr, r, w, dx, ddelta}))
      args(layer_norm_bwd_kernel<TR, TD, TO, 1, DY2>);
    else if (C == 512)
      reg_args(layer_norm_bwd_reg_kernel<TR, TD, TO, 2, DY2>);
    else if (C == 768)
      reg_args(layer_norm_bwd_reg_kernel<TR, TD, TO, 3, DY2>);
    else if (C == 1024)
      reg_args(layer_norm_bwd_reg_kernel<TR, TD, TO, 4, DY2>);
    else
      args(layer_norm_bwd_kernel<TR, TD, TO, 8, DY2>);
  };
  if (dy2)
    pick(std::true_type{});
  else
    pick(std::false_type{});
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  return column_sum(scratch, blocks, 2 * C, dw, C, db, stream);
}

}  // namespace

bool layer_norm_supports(int64_t C) { return C >= 1 && bwd_warps(C) >= 1; }

int64_t layer_norm_bwd_scratch(int64_t rows, int64_t C) {
  return rows > 0 && layer_norm_supports(C) ? bwd_blocks(rows, C) * 2 * C : 0;
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
                           DType to, int64_t rows, int64_t C, float eps, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (rows < 0 || !layer_norm_supports(C) || (delta && !r_out)) return cudaErrorInvalidValue;
  if (!delta) td = tr;  // unused
  CS_DISPATCH_LN(tr, td, to, fwd, x, delta, w, b, r_out, y, mean, rstd, rows, C, eps, stream);
}

cudaError_t layer_norm_bwd(const void* dy, const void* dy2, const void* dr, const void* r,
                           const float* mean, const float* rstd, const float* w, void* dx,
                           void* ddelta, float* dw, float* db, float* scratch, DType tr, DType td,
                           DType to, int64_t rows, int64_t C, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (rows < 0 || !layer_norm_supports(C)) return cudaErrorInvalidValue;
  if (!ddelta) td = tr;  // unused
  CS_DISPATCH_LN(tr, td, to, bwd, dy, dy2, dr, r, mean, rstd, w, dx, ddelta, dw, db, scratch, rows,
                 C, stream);
}

}  // namespace cuda
}  // namespace cs
