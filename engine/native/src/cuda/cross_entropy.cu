// cross_entropy.cu: GPT's cross-entropy in one kernel over the logits (llm.c's
// fused classifier): one block per row; the first pass reads the row once for
// an online max and sum of exponentials in fp32, the second (from L2) writes
// softmax - one-hot over the logits in their own dtype.
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

template <typename T, int N>
__global__ void __launch_bounds__(kThreads)
    cross_entropy_kernel(T* logits, int64_t ld, int64_t V, const int64_t* __restrict__ target,
              float* __restrict__ loss) {
  __shared__ float sm_m[kThreads / 32], sm_s[kThreads / 32];
  __shared__ float sm_lse;
  const int64_t row = blockIdx.x;
  T* z = logits + row * ld;
  const int64_t real = (V + N - 1) / N;  // packs that hold real columns

  float m = -INFINITY, s = 0.f;
  for (int64_t i = threadIdx.x; i < real; i += kThreads) {
    float x[N];
    load_f<T, N>(z + i * N, x);
    float pm = -INFINITY;
    bool nan = false;
#pragma unroll
    for (int k = 0; k < N; k++)
      if (i * N + k < V) {
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
        if (i * N + k < V) s += __expf(x[k] - m);
    }
    if (nan) s = NAN;  // a NaN logit makes the loss NaN, as log_softmax does
  }
  // Block reduction of (m, s): warps by shuffles, then the first warp.
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
      loss[row] = lse - to_f<T>(z[target[row]]);  // read before the row is overwritten
    }
  }
  __syncthreads();
  const float lse = sm_lse;
  const int64_t t = target[row];
  for (int64_t i = threadIdx.x; i < ld / N; i += kThreads) {
    float x[N];
    load_f<T, N>(z + i * N, x);
#pragma unroll
    for (int k = 0; k < N; k++) {
      const int64_t c = i * N + k;
      float g = c < V ? __expf(x[k] - lse) : 0.f;
      if (c == t) g -= 1.f;
      x[k] = g;
    }
    store_f<T, N>(z + i * N, x);
  }
}

template <typename T>
cudaError_t launch(void* logits, int64_t rows, int64_t ld, int64_t V, const int64_t* target,
                   float* loss, cudaStream_t stream) {
  constexpr int N = 16 / sizeof(T);
  T* z = static_cast<T*>(logits);
  if (ld % N == 0 && aligned(logits, 16))
    cross_entropy_kernel<T, N><<<unsigned(rows), kThreads, 0, stream>>>(z, ld, V, target, loss);
  else
    cross_entropy_kernel<T, 1><<<unsigned(rows), kThreads, 0, stream>>>(z, ld, V, target, loss);
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
