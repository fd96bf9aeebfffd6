// common.cuh: what the engine's CUDA kernels share: element conversion, packed
// loads and stores, warp reductions, dtype dispatch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <initializer_list>

#include "kernels_cuda.h"

namespace cs {
namespace cuda {

template <typename T>
__device__ __forceinline__ float to_f(T v);
template <>
__device__ __forceinline__ float to_f<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <>
__device__ __forceinline__ float to_f<__half>(__half v) {
  return __half2float(v);
}

// Round to nearest even, as PyTorch's casts do.
template <typename T>
__device__ __forceinline__ T from_f(float v);
template <>
__device__ __forceinline__ float from_f<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half from_f<__half>(float v) {
  return __float2half_rn(v);
}

// N consecutive elements, aligned to their size (one or two 16-byte accesses
// for N * sizeof(T) of 16 or 32).
template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

// Loads N elements at p (aligned to N * sizeof(T)) as floats.
template <typename T, int N>
__device__ __forceinline__ void load_f(const T* p, float (&out)[N]) {
  const Pack<T, N> pk = *reinterpret_cast<const Pack<T, N>*>(p);
#pragma unroll
  for (int k = 0; k < N; k++) out[k] = to_f<T>(pk.v[k]);
}

// Stores N floats at p (aligned to N * sizeof(T)) as T.
template <typename T, int N>
__device__ __forceinline__ void store_f(T* p, const float (&in)[N]) {
  Pack<T, N> pk;
#pragma unroll
  for (int k = 0; k < N; k++) pk.v[k] = from_f<T>(in[k]);
  *reinterpret_cast<Pack<T, N>*>(p) = pk;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Whether p is aligned to n bytes (null counts as aligned).
inline bool aligned(const void* p, int64_t n) {
  return reinterpret_cast<uintptr_t>(p) % uintptr_t(n) == 0;
}

// The multiprocessor count of the current device (cached per device).
int sm_count();

// Blocks of kernel (threads a block, smem bytes of dynamic shared memory)
// that one multiprocessor of the current device holds at once, at least 1
// (its registers and shared memory decide); cache holds one (threads, smem)
// answer per device.
int resident_per_sm(const void* kernel, int threads, size_t smem, std::atomic<uint64_t> (&cache)[64]);

// One wave of Kernel: the blocks of `threads` (with smem bytes of dynamic
// shared memory) that the whole device holds at once.
template <auto Kernel>
int resident_blocks(int threads, size_t smem = 0) {
  static std::atomic<uint64_t> cache[64];
  return resident_per_sm(reinterpret_cast<const void*>(Kernel), threads, smem, cache) * sm_count();
}

// Blocks of `threads` for Kernel's grid-stride loop over n items, one item a
// thread: as many as the items need, at most one wave, at least one block.
template <auto Kernel>
unsigned grid_stride_blocks(int64_t n, int threads, size_t smem = 0) {
  const int64_t cap = resident_blocks<Kernel>(threads, smem);
  const int64_t g = (n + threads - 1) / threads;
  return unsigned(g < cap ? (g > 0 ? g : 1) : cap);
}

// The most shared memory a block of the current device may opt in to, in
// bytes (cached per device).
int smem_per_block_optin();

// out[c] = the sum over the rows of part [rows][cols] of column c, for c <
// split, and out2[c - split] for the columns after (column_sum.cu; the second
// pass of a two-pass reduction over rows, deterministic).
cudaError_t column_sum(const float* part, int64_t rows, int64_t cols, float* out, int64_t split,
                       float* out2, cudaStream_t stream);
// The same with three outputs: out for c < split, out2 for split <= c <
// split2, out3[c - split2] for the columns after.
cudaError_t column_sum3(const float* part, int64_t rows, int64_t cols, float* out, int64_t split,
                        float* out2, int64_t split2, float* out3, cudaStream_t stream);

}  // namespace cuda
}  // namespace cs

// CS_DISPATCH(dt, T, ...): runs the statement with T the element type of dt.
#define CS_DISPATCH(dt, T, ...)                \
  switch (dt) {                                \
    case ::cs::cuda::DType::F32: {             \
      using T = float;                         \
      __VA_ARGS__;                             \
      break;                                   \
    }                                          \
    case ::cs::cuda::DType::BF16: {            \
      using T = __nv_bfloat16;                 \
      __VA_ARGS__;                             \
      break;                                   \
    }                                          \
    case ::cs::cuda::DType::F16: {             \
      using T = __half;                        \
      __VA_ARGS__;                             \
      break;                                   \
    }                                          \
    default:                                   \
      return cudaErrorInvalidValue;            \
  }
