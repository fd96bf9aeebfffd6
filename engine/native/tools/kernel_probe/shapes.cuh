// shapes.cuh: the engine's bias_act kernel (bias_act.cu: the backward of a
// linear layer's bias and the activation after it: dz = dy act'(z), db = the
// column sums of dz) rewritten as a template over its block shape, for
// gelu_bwd_probe to time shapes against the engine's kernel (docs/perf.md,
// "Twenty-fifth session"). Not part of the engine yet: no shape won at every
// width and activation the probe tried. A shape is BX threads
// across the columns (each N consecutive columns, one 16-byte access), RY
// threads down the rows, U rows a thread loads before it computes any, and B
// blocks a multiprocessor (one wave: the grid's row blocks are B x the
// multiprocessors over the column tiles). Each thread sums its rows in row
// order; a block's RY row lanes are added in a fixed order into one partial
// per block and column, which column_sum adds up over the blocks
// (deterministic, no atomics).
#pragma once

#include "common.cuh"
#include "gelu.h"

namespace cs {
namespace cuda {
namespace bias_act {

template <int BX_, int RY_, int U_, int B_>
struct Shape {
  static constexpr int BX = BX_, RY = RY_, U = U_, B = B_;
  static_assert(BX % 32 == 0 && BX * RY <= 1024 && U >= 1 && B >= 1, "bias_act: a block shape");
};

struct Split {
  int64_t col_tiles, row_blocks, rows_per_block;
};

// Column tiles of BX * N columns; row blocks so that B blocks per
// multiprocessor run in all, each with at least RY rows.
template <class S>
Split split(int64_t rows, int64_t C, int N) {
  const int64_t tiles = (C + int64_t(S::BX) * N - 1) / (int64_t(S::BX) * N);
  int64_t want = (int64_t(sm_count()) * S::B + tiles - 1) / tiles;
  const int64_t most = (rows + S::RY - 1) / S::RY;
  if (want > most) want = most;
  if (want < 1) want = 1;
  const int64_t rpb = (rows + want - 1) / want;
  return {tiles, (rows + rpb - 1) / rpb, rpb};
}

// Where a thread's column of dy lies, row by row: column(col) gives a cursor
// whose at(r) points at row r's element. Rows: dy itself, rows of C (the
// engine's kernel also gathers the qkv projection's rows, bias_act.cu's
// Heads: not probed here).
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

// U rows of a thread's columns: loaded raw (N values of T in 16 bytes or
// fewer, not N floats: U rows of dy and z in 8 U registers for bf16), then
// each converted, multiplied by act'(z) and rounded to T (dz as the unfused
// path stores it), written out where the activation changes dy or the rows
// were gathered, and added to the thread's sums in row order.
template <typename T, int N, Act A, class Src, int U, int RY>
__device__ __forceinline__ void rows_step(const typename Src::Cursor& cur, const T* __restrict__ z,
                                          T* __restrict__ dz, int64_t r, int count, int64_t C,
                                          int64_t col, float (&acc)[N]) {
  constexpr bool kAct = A != Act::None;
  constexpr bool kStore = kAct || Src::kGathers;
  Pack<T, N> g[U], v[U];
#pragma unroll
  for (int u = 0; u < U; u++) {
    if (u < count) {
      g[u] = *reinterpret_cast<const Pack<T, N>*>(cur.at(r + u * RY));
      if (kAct) v[u] = *reinterpret_cast<const Pack<T, N>*>(z + (r + u * RY) * C + col);
    }
  }
#pragma unroll
  for (int u = 0; u < U; u++) {
    if (u >= count) break;
    float o[N];
#pragma unroll
    for (int k = 0; k < N; k++) {
      float a = to_f<T>(g[u].v[k]);
      if (kAct) a = to_f<T>(from_f<T>(a * kern::act_grad(to_f<T>(v[u].v[k]), A)));
      o[k] = a;
      acc[k] += a;
    }
    if (kStore) store_f<T, N>(dz + (r + u * RY) * C + col, o);  // exact: o holds values of T
  }
}

template <class S, typename T, int N, Act A, class Src>
__global__ void __launch_bounds__(S::BX * S::RY, S::B)
    kernel(const Src src, const T* __restrict__ z, T* __restrict__ dz, int64_t rows, int C,
           int64_t rows_per_block, float* __restrict__ part) {
  constexpr int RY = S::RY, U = S::U;
  const int64_t col = (int64_t(blockIdx.x) * S::BX + threadIdx.x) * N;
  const int64_t r0 = int64_t(blockIdx.y) * rows_per_block;
  const int64_t r1 = r0 + rows_per_block < rows ? r0 + rows_per_block : rows;
  float acc[N];
#pragma unroll
  for (int k = 0; k < N; k++) acc[k] = 0.f;
  if (col < C) {
    const auto cur = src.column(col);
    for (int64_t r = r0 + threadIdx.y; r < r1; r += int64_t(U) * RY) {
      const int64_t left = (r1 - 1 - r) / RY + 1;  // rows of this thread from r on
      rows_step<T, N, A, Src, U, RY>(cur, z, dz, r, left < U ? int(left) : U, C, col, acc);
    }
  }
  if constexpr (RY == 1) {
    if (col < C) {
#pragma unroll
      for (int k = 0; k < N; k++) part[int64_t(blockIdx.y) * C + col + k] = acc[k];
    }
  } else {
    __shared__ float sm[RY][S::BX * N];
#pragma unroll
    for (int k = 0; k < N; k++) sm[threadIdx.y][threadIdx.x * N + k] = acc[k];
    __syncthreads();
    if (threadIdx.y != 0 || col >= C) return;
#pragma unroll
    for (int k = 0; k < N; k++) {
      float s = 0.f;
      for (int i = 0; i < RY; i++) s += sm[i][threadIdx.x * N + k];
      part[int64_t(blockIdx.y) * C + col + k] = s;
    }
  }
}

// The kernel of shape S over rows of C read through src, then the partials'
// column sum into db.
template <class S, typename T, int N, class Src>
cudaError_t launch(const Src& src, const void* z, void* dz, float* db, float* scratch, Act act,
                   int64_t rows, int64_t C, cudaStream_t stream) {
  const Split s = split<S>(rows, C, N);
  const dim3 grid(unsigned(s.col_tiles), unsigned(s.row_blocks)), block(S::BX, S::RY);
  const T* zt = static_cast<const T*>(z);
  T* dzt = static_cast<T*>(dz);
  auto args = [&](auto k) { k<<<grid, block, 0, stream>>>(src, zt, dzt, rows, int(C), s.rows_per_block, scratch); };
  if (act == Act::GeluTanh)
    args(kernel<S, T, N, Act::GeluTanh, Src>);
  else if (act == Act::GeluErf)
    args(kernel<S, T, N, Act::GeluErf, Src>);
  else
    args(kernel<S, T, N, Act::None, Src>);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  return column_sum(scratch, s.row_blocks, C, db, C, nullptr, stream);
}

// dy of rows x C: the vector width where C and the pointers allow, else 1.
template <class S, typename T>
cudaError_t run_rows(const void* dy, const void* z, void* dz, float* db, float* scratch, Act act,
                     int64_t rows, int64_t C, cudaStream_t stream) {
  constexpr int N = 16 / sizeof(T);
  const Rows<T> src{static_cast<const T*>(dy), C};
  if (C % N == 0 && aligned(dy, 16) && aligned(z, 16) && aligned(dz, 16))
    return launch<S, T, N>(src, z, dz, db, scratch, act, rows, C, stream);
  return launch<S, T, 1>(src, z, dz, db, scratch, act, rows, C, stream);
}

}  // namespace bias_act
}  // namespace cuda
}  // namespace cs
