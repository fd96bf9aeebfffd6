// cross_entropy.cu: GPT's cross-entropy in one kernel over the logits (llm.c's
// fused classifier): per row, the first pass reads the row for an online max
// and sum of exponentials in fp32, the second writes softmax - one-hot over the
// logits in their own dtype. Where two rows fit in shared memory (GPT-2's
// 50,304 bf16 logits: 2 x 98 KB) one block per multiprocessor goes through
// the rows with both passes on a row in shared memory while the next row is
// copied in (cp.async): the logits are read from memory once and the reads
// never wait for a row's reduction. Else one block per row, the second pass
// reading the row again (from L2 where it is still there).
#include <cuda_pipeline.h>

#include <cfloat>

#include "common.cuh"

namespace cs {
namespace cuda {
namespace {

constexpr int kThreads = 512;       // one block per row
constexpr int kPipeThreads = 1024;  // one block per multiprocessor, rows in turn

// (m, s): a running max and the sum of exp(x - m). Combines two such pairs.
__device__ __forceinline__ void combine(float& m, float& s, float m2, float s2) {
  if (m2 > m) {
    const float t = m;
    m = m2;
    m2 = t;
    const float u = s;
    s = s2;
    s2 = u;
  }
  if (m2 != -INFINITY || s2 != s2) s += s2 * __expf(m2 - m);  // NaN stays NaN
}

constexpr float kLog2e = 1.4426950408889634f;

// 2^x (the multifunction unit's approximation, as __expf uses; subnormal
// results flush to 0).
__device__ __forceinline__ float exp2_fast(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Folds the pack x of columns c0 .. c0 + N - 1 (those below V) into (m, s).
// A pack of real columns only (all but a row's last) takes a few instructions
// a column: the kernel would otherwise be bound by them, not by memory.
template <int N>
__device__ __forceinline__ void fold(const float (&x)[N], int64_t c0, int64_t V, float& m, float& s) {
  if (c0 + N <= V) {
    float pm = x[0];
#pragma unroll
    for (int k = 1; k < N; k++) pm = fmaxf(pm, x[k]);  // skips NaN
    if (pm > m) {
      s *= exp2_fast((m - pm) * kLog2e);  // 0 while m is -inf (s is 0 then too)
      m = pm;
    }
    if (m != -INFINITY) {
      const float mb = m * kLog2e;
#pragma unroll
      for (int k = 0; k < N; k++) s += exp2_fast(fmaf(x[k], kLog2e, -mb));  // a NaN x: s NaN
      return;
    }
    // Every column so far -inf or NaN: a NaN still has to show.
#pragma unroll
    for (int k = 0; k < N; k++)
      if (x[k] != x[k]) s = NAN;
    return;
  }
  float pm = -INFINITY;
  bool nan = false;
#pragma unroll
  for (int k = 0; k < N; k++)
    if (c0 + k < V) {
      pm = fmaxf(pm, x[k]);  // fmaxf skips NaN: flagged apart
      nan |= x[k] != x[k];
    }
  if (pm > m) {
    s *= __expf(m - pm);
    m = pm;
  }
  if (m != -INFINITY) {
#pragma unroll
    for (int k = 0; k < N; k++)
      if (c0 + k < V) s += __expf(x[k] - m);
  }
  if (nan) s = NAN;  // a NaN logit makes the loss NaN, as log_softmax does
}

// The block's (m, s) combined into the row's logsumexp, returned to every
// thread; the first writes loss = lse - z[t] (before the row is overwritten).
template <int THREADS, typename T>
__device__ float row_lse(float m, float s, const T* z, int64_t t, float* loss) {
  __shared__ float sm_m[THREADS / 32], sm_s[THREADS / 32];
  __shared__ float sm_lse;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
    const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
    combine(m, s, m2, s2);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    sm_m[warp] = m;
    sm_s[warp] = s;
  }
  __syncthreads();
  if (warp == 0) {
    m = lane < THREADS / 32 ? sm_m[lane] : -INFINITY;
    s = lane < THREADS / 32 ? sm_s[lane] : 0.f;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
      const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
      combine(m, s, m2, s2);
    }
    if (lane == 0) {
      const float lse = m + logf(s);
      sm_lse = lse;
      *loss = lse - to_f<T>(z[t]);
    }
  }
  __syncthreads();
  return sm_lse;
}

// The pack x of columns c0 .. becomes softmax - one-hot (0 from V on).
template <int N>
__device__ __forceinline__ void grad(float (&x)[N], int64_t c0, int64_t V, int64_t t, float lse) {
  if (c0 + N <= V) {
    const float lb = lse * kLog2e;
    const int64_t d64 = t - c0;  // the target's place in this pack, if it is here
    const int d = d64 >= 0 && d64 < N ? int(d64) : -1;
#pragma unroll
    for (int k = 0; k < N; k++) {
      x[k] = exp2_fast(fmaf(x[k], kLog2e, -lb));
      if (d == k) x[k] -= 1.f;
    }
    return;
  }
#pragma unroll
  for (int k = 0; k < N; k++) {
    const int64_t c = c0 + k;
    float g = c < V ? __expf(x[k] - lse) : 0.f;
    if (c == t) g -= 1.f;
    x[k] = g;
  }
}

template <typename T, int N>
__global__ void __launch_bounds__(kThreads)
    cross_entropy_kernel(T* logits, int64_t ld, int64_t V, const int64_t* __restrict__ target,
                         float* __restrict__ loss) {
  const int64_t row = blockIdx.x, t = target[row];
  T* z = logits + row * ld;
  const int64_t real = (V + N - 1) / N;  // packs that hold real columns
  float m = -INFINITY, s = 0.f;
  for (int64_t i = threadIdx.x; i < real; i += kThreads) {
    float x[N];
    load_f<T, N>(z + i * N, x);
    fold(x, i * N, V, m, s);
  }
  const float lse = row_lse<kThreads>(m, s, z, t, loss + row);
  for (int64_t i = threadIdx.x; i < ld / N; i += kThreads) {
    float x[N];
    load_f<T, N>(z + i * N, x);
    grad(x, i * N, V, t, lse);
    store_f<T, N>(z + i * N, x);
  }
}

// Issues the copy of row `row` of z into buf (ld / N packs of 16 bytes), each
// thread its packs, as one cp.async batch (committed even when empty, so
// that every thread's batches count alike).
template <typename T, int N>
__device__ __forceinline__ void copy_row(Pack<T, N>* buf, const T* logits, int64_t row,
                                         int64_t rows, int64_t ld) {
  if (row < rows) {
    const T* z = logits + row * ld;
    for (int64_t i = threadIdx.x; i < ld / N; i += kPipeThreads)
      __pipeline_memcpy_async(buf + i, z + i * N, sizeof(Pack<T, N>));
  }
  __pipeline_commit();
}

// The rows blockIdx.x, + gridDim.x, ... in turn, each in one of two shared
// buffers of ld / N packs while the next row is copied into the other.
template <typename T, int N>
__global__ void __launch_bounds__(kPipeThreads, 1)
    cross_entropy_pipe_kernel(T* logits, int64_t rows, int64_t ld, int64_t V,
                              const int64_t* __restrict__ target, float* __restrict__ loss) {
  extern __shared__ __align__(16) unsigned char sm_raw[];
  Pack<T, N>* bufs[2] = {reinterpret_cast<Pack<T, N>*>(sm_raw),
                         reinterpret_cast<Pack<T, N>*>(sm_raw) + ld / N};
  const int64_t packs = ld / N, real = (V + N - 1) / N;  // all packs; those with real columns
  copy_row(bufs[0], logits, blockIdx.x, rows, ld);
  int b = 0;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x, b ^= 1) {
    copy_row(bufs[b ^ 1], logits, row + gridDim.x, rows, ld);  // the buffer freed last turn
    __pipeline_wait_prior(1);  // this thread's copies of this row are done
    __syncthreads();           // and every thread's
    const Pack<T, N>* buf = bufs[b];
    T* z = logits + row * ld;
    const int64_t t = target[row];
    float m = -INFINITY, s = 0.f;
    for (int64_t i = threadIdx.x; i < real; i += kPipeThreads) {
      float x[N];
      load_f<T, N>(buf[i].v, x);
      fold(x, i * N, V, m, s);
    }
    const float lse = row_lse<kPipeThreads>(m, s, z, t, loss + row);
    for (int64_t i = threadIdx.x; i < packs; i += kPipeThreads) {
      float x[N];
      load_f<T, N>(buf[i].v, x);
      grad(x, i * N, V, t, lse);
      store_f<T, N>(z + i * N, x);
    }
    __syncthreads();  // buf is read by all before the next turn copies into it
  }
}

template <typename T>
cudaError_t launch(void* logits, int64_t rows, int64_t ld, int64_t V, const int64_t* target,
                   float* loss, cudaStream_t stream) {
  constexpr int N = 16 / sizeof(T);
  T* z = static_cast<T*>(logits);
  if (ld % N || !aligned(logits, 16)) {
    cross_entropy_kernel<T, 1><<<unsigned(rows), kThreads, 0, stream>>>(z, ld, V, target, loss);
    return cudaGetLastError();
  }
  const int64_t bytes = 2 * ld * int64_t(sizeof(T));  // two rows
  if (bytes <= smem_per_block_optin()) {
    auto kernel = cross_entropy_pipe_kernel<T, N>;
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
    if (e != cudaSuccess) return e;
    const int64_t grid = rows < sm_count() ? rows : sm_count();
    kernel<<<unsigned(grid), kPipeThreads, size_t(bytes), stream>>>(z, rows, ld, V, target, loss);
  } else {
    cross_entropy_kernel<T, N><<<unsigned(rows), kThreads, 0, stream>>>(z, ld, V, target, loss);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t cross_entropy_fwd_grad(void* logits, DType t, int64_t rows, int64_t ld, int64_t V,
                                   const int64_t* target, float* loss, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (rows < 0 || rows > INT32_MAX || V < 1 || ld < V) return cudaErrorInvalidValue;
  CS_DISPATCH(t, T, return launch<T>(logits, rows, ld, V, target, loss, stream));
  return cudaSuccess;
}

}  // namespace cuda
}  // namespace cs
