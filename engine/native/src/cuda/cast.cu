// cast.cu: many fp32 tensors cast to bf16 or fp16 in one launch (the linear
// layers' weights and biases, kernels.h "cast"): a block converts 8,192
// consecutive elements of one tensor, its tensor found by a binary search over
// the tensors' first blocks; 8 elements at a time a thread, with 32- and
// 16-byte accesses where a tensor's pointers allow, one by one where they do not.
#include "common.cuh"

namespace cs {
namespace cuda {
namespace {

constexpr int kThreads = 256, kPer = 8, kIters = 4, kChunk = kThreads * kPer * kIters;
constexpr int kMaxJobs = 64;  // per launch: the batch travels as a kernel argument (< 4 KB)

struct Batch {
  const float* src[kMaxJobs];
  void* dst[kMaxJobs];
  int64_t n[kMaxJobs];
  int64_t first[kMaxJobs + 1];  // the first block of each job; first[count]: all blocks
  int count;
  bool vec[kMaxJobs];
};

template <typename T>
__global__ void __launch_bounds__(kThreads) cast_kernel(const __grid_constant__ Batch b) {
  const int64_t block = blockIdx.x;
  int lo = 0, hi = b.count - 1;  // the last job whose first block is <= block
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (b.first[mid] <= block)
      lo = mid;
    else
      hi = mid - 1;
  }
  const float* src = b.src[lo];
  T* dst = static_cast<T*>(b.dst[lo]);
  const int64_t n = b.n[lo];
  const int64_t base = (block - b.first[lo]) * kChunk + int64_t(threadIdx.x) * kPer;
#pragma unroll
  for (int it = 0; it < kIters; it++) {
    const int64_t i = base + int64_t(it) * kThreads * kPer;
    if (b.vec[lo] && i + kPer <= n) {
      float v[kPer];
      load_f<float, kPer>(src + i, v);
      store_f<T, kPer>(dst + i, v);
    } else {
      for (int64_t k = i; k < i + kPer && k < n; k++) dst[k] = from_f<T>(src[k]);
    }
  }
}

}  // namespace

cudaError_t cast_f32_many(const CastJob* jobs, int count, DType to, cudaStream_t stream) {
  if (count < 0 || (to != DType::BF16 && to != DType::F16)) return cudaErrorInvalidValue;
  for (int start = 0; start < count; start += kMaxJobs) {
    Batch b{};
    b.count = count - start < kMaxJobs ? count - start : kMaxJobs;
    int64_t blocks = 0;
    for (int j = 0; j < b.count; j++) {
      const CastJob& job = jobs[start + j];
      if (job.n < 0 || (job.n > 0 && (!job.src || !job.dst))) return cudaErrorInvalidValue;
      b.src[j] = job.src;
      b.dst[j] = job.dst;
      b.n[j] = job.n;
      b.vec[j] = aligned(job.src, 32) && aligned(job.dst, 16);
      b.first[j] = blocks;
      blocks += (job.n + kChunk - 1) / kChunk;
    }
    b.first[b.count] = blocks;
    if (blocks == 0) continue;
    if (to == DType::BF16)
      cast_kernel<__nv_bfloat16><<<unsigned(blocks), kThreads, 0, stream>>>(b);
    else
      cast_kernel<__half><<<unsigned(blocks), kThreads, 0, stream>>>(b);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace cuda
}  // namespace cs
