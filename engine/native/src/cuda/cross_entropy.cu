// cross_entropy.cu: GPT's cross-entropy in one kernel over the logits (llm.c's
// fused classifier): one block per row; the first pass reads the row once for
// an online max and sum of exponentials in fp32, the second writes softmax -
// one-hot over the logits in their own dtype. Where the row fits in shared
// memory (GPT-2's 50,304 bf16 logits: 98 KB, two rows per multiprocessor) the
// first pass keeps it there for the second, so the logits are read from
// memory once; else the second pass reads the row again (from L2, where
// enough of it is still there: with ~500 rows of 98 KB in flight, not all).
#include <cfloat>

#include "common.cuh"

namespace cs {
namespace cuda {
namespace {

constexpr int kThreads = 512;

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

// Folds the pack x of columns c0 .. c0 + N - 1 (those below V) into (m, s).
template <int N>
__device__ __forceinline__ void fold(const float (&x)[N], int64_t c0, int64_t V, float& m, float& s) {
  float pm = -INFINITY;
  bool nan = false;
#pragma unroll
  for (int k = 0; k < N; k++)
    if (c0 + k < V) {
      pm = fmaxf(pm, x[k]);  // fmaxf skips NaN: flagged apart
      nan |= x[k] != x[k];
    }
  if (pm > m) {
    s *= __expf(m - pm);  // 0 while m is -inf (s is 0 then too)
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
template <typename T>
__device__ float row_lse(float m, float s, const T* z, int64_t t, float* loss) {
  __shared__ float sm_m[kThreads / 32], sm_s[kThreads / 32];
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
    m = lane < kThreads / 32 ? sm_m[lane] : -INFINITY;
    s = lane < kThreads / 32 ? sm_s[lane] : 0.f;
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
  const float lse = row_lse(m, s, z, t, loss + row);
  for (int64_t i = threadIdx.x; i < ld / N; i += kThreads) {
    float x[N];
    load_f<T, N>(z + i * N, x);
    grad(x, i * N, V, t, lse);
    store_f<T, N>(z + i * N, x);
  }
}

// The same with the row staged in shared memory (ld / N packs) by the first pass.
template <typename T, int N>
__global__ void __launch_bounds__(kThreads)
    cross_entropy_smem_kernel(T* logits, int64_t ld, int64_t V, const int64_t* __restrict__ target,
                              float* __restrict__ loss) {
  extern __shared__ __align__(16) unsigned char sm_raw[];
  Pack<T, N>* row_sm = reinterpret_cast<Pack<T, N>*>(sm_raw);
  const int64_t row = blockIdx.x, t = target[row];
  T* z = logits + row * ld;
  const int64_t packs = ld / N;
  float m = -INFINITY, s = 0.f;
#pragma unroll 4
  for (int64_t i = threadIdx.x; i < packs; i += kThreads) {
    const Pack<T, N> pk = *reinterpret_cast<const Pack<T, N>*>(z + i * N);
    row_sm[i] = pk;
    float x[N];
#pragma unroll
    for (int k = 0; k < N; k++) x[k] = to_f<T>(pk.v[k]);
    fold(x, i * N, V, m, s);
  }
  const float lse = row_lse(m, s, z, t, loss + row);  // its barrier publishes row_sm too
  for (int64_t i = threadIdx.x; i < packs; i += kThreads) {
    const Pack<T, N> pk = row_sm[i];
    float x[N];
#pragma unroll
    for (int k = 0; k < N; k++) x[k] = to_f<T>(pk.v[k]);
    grad(x, i * N, V, t, lse);
    store_f<T, N>(z + i * N, x);
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
  const int64_t bytes = ld * int64_t(sizeof(T));
  if (bytes <= smem_per_block_optin()) {
    auto kernel = cross_entropy_smem_kernel<T, N>;
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
    if (e != cudaSuccess) return e;
    kernel<<<unsigned(rows), kThreads, size_t(bytes), stream>>>(z, ld, V, target, loss);
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
