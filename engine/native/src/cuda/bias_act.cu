// bias_act.cu: the backward of a linear layer's bias and the activation after
// it: dz = dy act'(z) (act none: dz is dy) and the bias gradient db = the sum
// of dz over the rows, in one pass over dy (and z). Each thread owns N
// consecutive columns (one 16-byte access) of every 8th row of its block's
// slice of rows; a block's 8 row lanes are summed in shared memory in a fixed
// order into one partial per block and column, which column_sum adds up over
// the blocks (deterministic, no atomics). The same kernel serves the qkv
// projection (kernels.h "qkv"): its rows of dy gathered from the q, k and v
// gradients, written out as dz, and summed in the same pass.
#include "common.cuh"
#include "gelu.h"

namespace cs {
namespace cuda {
namespace {

constexpr int kCols = 32;  // threads across the columns (one warp)
constexpr int kRows = 8;   // threads down the rows

struct Split {
  int64_t col_tiles, row_blocks, rows_per_block;
};

// Column tiles of kCols * N columns; row blocks so that about 4 blocks per
// multiprocessor run in all (one wave: the most its registers let reside).
Split split(int64_t rows, int64_t C, int N) {
  const int64_t tiles = (C + int64_t(kCols) * N - 1) / (int64_t(kCols) * N);
  int64_t want = (int64_t(sm_count()) * 4 + tiles - 1) / tiles;
  const int64_t most = (rows + kRows - 1) / kRows;
  if (want > most) want = most;
  if (want < 1) want = 1;
  const int64_t rpb = (rows + want - 1) / want;
  return {tiles, (rows + rpb - 1) / rpb, rpb};
}

template <typename T>
int vec_width(const void* dy, const void* z, const void* dz, int64_t C) {
  constexpr int N = 16 / sizeof(T);
  if (C % N || !aligned(dy, 16) || !aligned(z, 16) || !aligned(dz, 16)) return 1;
  return N;
}

// Where a thread's column of dy lies, row by row: column(col) gives a cursor
// whose at(r) points at row r's element.
// Rows: dy itself, rows of C.
template <typename T>
struct Rows {
  static constexpr bool kGathers = false;
  const T* dy;
  int64_t C;
  struct Cursor {
    const T* p;
    int64_t C;
    __device__ const T* at(int64_t r) const { return p + r * C; }
  };
  __device__ Cursor column(int64_t col) const { return {dy + col, C}; }
};

// Heads: the q, k and v gradients [B, H, T, D] (strides b, h, t and 1), row
// b T + t, column s H D + h D + j of source s (HeadsGrad).
template <typename T>
struct Heads {
  static constexpr bool kGathers = true;
  const T* src[3];
  int64_t sb[3], sh[3], st[3];
  uint32_t H, T_, D;
  struct Cursor {
    const T* p;
    int64_t sb, st;
    uint32_t T_;
    __device__ const T* at(int64_t r) const {
      const uint32_t b = uint32_t(r) / T_, t = uint32_t(r) - b * T_;
      return p + int64_t(b) * sb + int64_t(t) * st;
    }
  };
  // Selects, not src[s]: a runtime index into a kernel argument would go
  // through local memory.
  template <typename V>
  __device__ static V pick(uint32_t s, V a, V b, V c) {
    return s == 0 ? a : s == 1 ? b : c;
  }
  __device__ Cursor column(int64_t col) const {
    const uint32_t d = H * D, s = uint32_t(col) / d, rem = uint32_t(col) - s * d;
    const uint32_t h = rem / D, j = rem - h * D;
    const T* base = pick(s, src[0], src[1], src[2]) + int64_t(h) * pick(s, sh[0], sh[1], sh[2]) + j;
    return {base, pick(s, sb[0], sb[1], sb[2]), pick(s, st[0], st[1], st[2]), T_};
  }
};

// The activation A is a template argument and each thread loads kUnroll rows
// before it computes any (the loads of a runtime switch's branches were not
// hoisted: one row in flight per thread, latency-bound); at most 64 registers,
// so that the 4 blocks per multiprocessor of split() fit. The rows are summed
// in row order either way. dz is written where the activation changes dy or
// the rows were gathered.
constexpr int kUnroll = 2;

template <typename T, int N, Act A, class Src>
__global__ void __launch_bounds__(kCols * kRows, 4)
    bias_act_bwd_kernel(const Src src, const T* __restrict__ z, T* __restrict__ dz, int64_t rows,
                        int C, int64_t rows_per_block, float* __restrict__ part) {
  constexpr bool kAct = A != Act::None;
  constexpr bool kStore = kAct || Src::kGathers;
  __shared__ float sm[kRows][kCols * N];
  const int64_t col = (int64_t(blockIdx.x) * kCols + threadIdx.x) * N;
  const int64_t r0 = int64_t(blockIdx.y) * rows_per_block;
  const int64_t r1 = r0 + rows_per_block < rows ? r0 + rows_per_block : rows;
  float acc[N];
#pragma unroll
  for (int k = 0; k < N; k++) acc[k] = 0.f;
  if (col < C) {
    const auto cur = src.column(col);
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kUnroll * kRows) {
      float g[kUnroll][N], v[kUnroll][N];
#pragma unroll
      for (int u = 0; u < kUnroll; u++) {
        if (r + u * kRows < r1) {
          load_f<T, N>(cur.at(r + u * kRows), g[u]);
          if (kAct) load_f<T, N>(z + (r + u * kRows) * C + col, v[u]);
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; u++) {
        if (r + u * kRows >= r1) break;
        if (kAct) {
#pragma unroll
          for (int k = 0; k < N; k++) g[u][k] = to_f<T>(from_f<T>(g[u][k] * kern::act_grad(v[u][k], A)));
        }
        if (kStore) store_f<T, N>(dz + (r + u * kRows) * C + col, g[u]);  // exact: g holds values of T
#pragma unroll
        for (int k = 0; k < N; k++) acc[k] += g[u][k];
      }
    }
  }
#pragma unroll
  for (int k = 0; k < N; k++) sm[threadIdx.y][threadIdx.x * N + k] = acc[k];
  __syncthreads();
  if (threadIdx.y != 0 || col >= C) return;
#pragma unroll
  for (int k = 0; k < N; k++) {
    float s = 0.f;
    for (int i = 0; i < kRows; i++) s += sm[i][threadIdx.x * N + k];
    part[int64_t(blockIdx.y) * C + col + k] = s;
  }
}

// The kernel over rows of C read through src, then the partials' column sum.
template <typename T, int N, class Src>
cudaError_t launch(const Src& src, const void* z, void* dz, float* db, float* scratch, Act act,
                   int64_t rows, int64_t C, cudaStream_t stream) {
  const Split s = split(rows, C, N);
  const dim3 grid(unsigned(s.col_tiles), unsigned(s.row_blocks)), block(kCols, kRows);
  const T* zt = static_cast<const T*>(z);
  T* dzt = static_cast<T*>(dz);
  auto args = [&](auto kernel) {
    kernel<<<grid, block, 0, stream>>>(src, zt, dzt, rows, int(C), s.rows_per_block, scratch);
  };
  if constexpr (Src::kGathers)  // the qkv projection: no activation
    args(bias_act_bwd_kernel<T, N, Act::None, Src>);
  else if (act == Act::GeluTanh)
    args(bias_act_bwd_kernel<T, N, Act::GeluTanh, Src>);
  else if (act == Act::GeluErf)
    args(bias_act_bwd_kernel<T, N, Act::GeluErf, Src>);
  else
    args(bias_act_bwd_kernel<T, N, Act::None, Src>);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  return column_sum(scratch, s.row_blocks, C, db, C, nullptr, stream);
}

template <typename T>
cudaError_t run(const void* dy, const void* z, void* dz, float* db, float* scratch, Act act,
                int64_t rows, int64_t C, cudaStream_t stream) {
  constexpr int N = 16 / sizeof(T);
  const Rows<T> src{static_cast<const T*>(dy), C};
  if (vec_width<T>(dy, z, dz, C) == N) return launch<T, N>(src, z, dz, db, scratch, act, rows, C, stream);
  return launch<T, 1>(src, z, dz, db, scratch, act, rows, C, stream);
}

template <typename T>
cudaError_t run_heads(const HeadsGrad& g, void* dz, float* db, float* scratch, cudaStream_t stream) {
  constexpr int N = 16 / sizeof(T);
  Heads<T> src;
  bool vec = g.D % N == 0 && aligned(dz, 16);
  for (int s = 0; s < 3; s++) {
    src.src[s] = static_cast<const T*>(g.src[s]);
    src.sb[s] = g.stride[s][0];
    src.sh[s] = g.stride[s][1];
    src.st[s] = g.stride[s][2];
    vec = vec && aligned(g.src[s], 16) && src.sb[s] % N == 0 && src.sh[s] % N == 0 && src.st[s] % N == 0;
  }
  src.H = uint32_t(g.H);
  src.T_ = uint32_t(g.T);
  src.D = uint32_t(g.D);
  const int64_t rows = g.B * g.T, C = 3 * g.H * g.D;
  if (vec) return launch<T, N>(src, nullptr, dz, db, scratch, Act::None, rows, C, stream);
  return launch<T, 1>(src, nullptr, dz, db, scratch, Act::None, rows, C, stream);
}

}  // namespace

int64_t bias_act_bwd_scratch(int64_t rows, int64_t C) {
  if (rows <= 0 || C <= 0) return 1;
  int64_t most = 1;  // over the vector widths of the dtypes (wider: fewer tiles, more row blocks)
  for (int n : {1, 4, 8}) {
    const int64_t b = split(rows, C, n).row_blocks;
    if (b > most) most = b;
  }
  return most * C;
}

cudaError_t bias_act_bwd(const void* dy, const void* z, void* dz_out, float* db, float* scratch,
                         DType t, Act act, int64_t rows, int64_t C, cudaStream_t stream) {
  if (rows < 0 || C < 1 || C > INT32_MAX || (act != Act::None && (!z || !dz_out)))
    return cudaErrorInvalidValue;
  if (rows == 0) return cudaMemsetAsync(db, 0, size_t(C) * sizeof(float), stream);
  CS_DISPATCH(t, T, return run<T>(dy, z, dz_out, db, scratch, act, rows, C, stream));
  return cudaSuccess;
}

cudaError_t qkv_bwd(const HeadsGrad& g, void* dz, float* db, float* scratch, DType t,
                    cudaStream_t stream) {
  if (!heads_grad_valid(g) || !dz) return cudaErrorInvalidValue;
  if (g.B * g.T == 0) return cudaMemsetAsync(db, 0, size_t(3 * g.H * g.D) * sizeof(float), stream);
  CS_DISPATCH(t, T, return run_heads<T>(g, dz, db, scratch, stream));
  return cudaSuccess;
}

}  // namespace cuda
}  // namespace cs
