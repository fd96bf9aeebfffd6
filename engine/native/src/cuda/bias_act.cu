// bias_act.cu: the backward of a linear layer's bias and the activation after
// it: dz = dy act'(z) (act none: dz is dy) and the bias gradient db = the sum
// of dz over the rows, in one pass over dy (and z). Each thread owns N
// consecutive columns (one 16-byte access) of every 8th row of its block's
// slice of rows; a block's 8 row lanes are summed in shared memory in a fixed
// order into one partial per block and column, which column_sum adds up over
// the blocks (deterministic, no atomics).
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

// The activation A is a template argument and each thread loads kUnroll rows
// before it computes any (the loads of a runtime switch's branches were not
// hoisted: one row in flight per thread, latency-bound); at most 64 registers,
// so that the 4 blocks per multiprocessor of split() fit. The rows are summed
// in row order either way.
constexpr int kUnroll = 2;

template <typename T, int N, Act A>
__global__ void __launch_bounds__(kCols * kRows, 4)
    bias_act_bwd_kernel(const T* __restrict__ dy, const T* __restrict__ z, T* __restrict__ dz,
                        int64_t rows, int C, int64_t rows_per_block, float* __restrict__ part) {
  constexpr bool kAct = A != Act::None;
  __shared__ float sm[kRows][kCols * N];
  const int64_t col = (int64_t(blockIdx.x) * kCols + threadIdx.x) * N;
  const int64_t r0 = int64_t(blockIdx.y) * rows_per_block;
  const int64_t r1 = r0 + rows_per_block < rows ? r0 + rows_per_block : rows;
  float acc[N];
#pragma unroll
  for (int k = 0; k < N; k++) acc[k] = 0.f;
  if (col < C) {
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kUnroll * kRows) {
      float g[kUnroll][N], v[kUnroll][N];
#pragma unroll
      for (int u = 0; u < kUnroll; u++) {
        const int64_t off = (r + u * kRows) * C + col;
        if (r + u * kRows < r1) {
          load_f<T, N>(dy + off, g[u]);
          if (kAct) load_f<T, N>(z + off, v[u]);
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; u++) {
        if (r + u * kRows >= r1) break;
        if (kAct) {
#pragma unroll
          for (int k = 0; k < N; k++) g[u][k] = to_f<T>(from_f<T>(g[u][k] * kern::act_grad(v[u][k], A)));
          store_f<T, N>(dz + (r + u * kRows) * C + col, g[u]);  // exact: g holds values of T
        }
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

template <typename T, int N>
cudaError_t launch(const void* dy, const void* z, void* dz, float* db, float* scratch, Act act,
                   int64_t rows, int64_t C, cudaStream_t stream) {
  const Split s = split(rows, C, N);
  const dim3 grid(unsigned(s.col_tiles), unsigned(s.row_blocks)), block(kCols, kRows);
  const T* dyt = static_cast<const T*>(dy);
  const T* zt = static_cast<const T*>(z);
  T* dzt = static_cast<T*>(dz);
  auto args = [&](auto kernel) {
    kernel<<<grid, block, 0, stream>>>(dyt, zt, dzt, rows, int(C), s.rows_per_block, scratch);
  };
  if (act == Act::GeluTanh)
    args(bias_act_bwd_kernel<T, N, Act::GeluTanh>);
  else if (act == Act::GeluErf)
    args(bias_act_bwd_kernel<T, N, Act::GeluErf>);
  else
    args(bias_act_bwd_kernel<T, N, Act::None>);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  return column_sum(scratch, s.row_blocks, C, db, C, nullptr, stream);
}

template <typename T>
cudaError_t run(const void* dy, const void* z, void* dz, float* db, float* scratch, Act act,
                int64_t rows, int64_t C, cudaStream_t stream) {
  constexpr int N = 16 / sizeof(T);
  if (vec_width<T>(dy, z, dz, C) == N) return launch<T, N>(dy, z, dz, db, scratch, act, rows, C, stream);
  return launch<T, 1>(dy, z, dz, db, scratch, act, rows, C, stream);
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

}  // namespace cuda
}  // namespace cs
