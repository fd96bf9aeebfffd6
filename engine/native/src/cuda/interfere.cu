// interfere.cu: the κ calibration's side-stream load (issue 40,
// docs/predict.md): what a concurrent NCCL collective does to the compute it
// overlaps, without a second GPU. blocks blocks of kThreads threads (one a
// multiprocessor where the scheduler spreads them, as NCCL's channels take
// one block each) copy src to dst, 16 bytes a thread at a time, block b its
// own slice, round after round until *stop reaches epoch (the stop flag only
// grows: a late launch never misses its stop, an early stop never ends the
// next launch); each block paced to
// bytes_per_ns (read + written; 0: as fast as it goes). *copied gains the
// bytes read and written. A block stops by itself after max_ns (and counts it
// in *timeouts): a backward pass that waits for the whole device (a device-wide
// synchronisation inside it) would otherwise wait for this kernel, which waits
// for the backward's end: the calibration would hang instead of failing.
#include "common.cuh"

namespace cs {
namespace cuda {
namespace {

constexpr int kThreads = 512;

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void __launch_bounds__(kThreads)
    interfere_kernel(const int4* __restrict__ src, int4* __restrict__ dst, int64_t n,
                     const volatile int* stop, int epoch, double bytes_per_ns, unsigned long long* copied,
                     uint64_t max_ns, unsigned long long* timeouts) {
  __shared__ int done;
  const uint64_t t0 = global_ns();
  const int64_t per = (n + gridDim.x - 1) / gridDim.x;
  const int64_t lo = int64_t(blockIdx.x) * per;
  const int64_t hi = lo + per < n ? lo + per : n;
  unsigned long long moved = 0;
  for (;;) {
    if (threadIdx.x == 0) done = *stop >= epoch ? 1 : global_ns() - t0 > max_ns ? 2 : 0;
    __syncthreads();
    if (done) break;
    for (int64_t i = lo + threadIdx.x; i < hi; i += kThreads) dst[i] = src[i];
    if (hi > lo) moved += (unsigned long long)(hi - lo) * 2 * sizeof(int4);
    __syncthreads();
    if (threadIdx.x == 0 && bytes_per_ns > 0) {
      while (double(global_ns() - t0) * bytes_per_ns < double(moved) && *stop < epoch && global_ns() - t0 <= max_ns)
        __nanosleep(1000);
    }
  }
  if (threadIdx.x == 0) {
    atomicAdd(copied, moved);
    if (done == 2) atomicAdd(timeouts, 1ull);
  }
}

}  // namespace

cudaError_t interfere_copy(const void* src, void* dst, int64_t bytes, int blocks, double gbps,
                           const int* stop, int epoch, unsigned long long* copied, uint64_t max_ns,
                           unsigned long long* timeouts, cudaStream_t stream) {
  if (blocks < 1 || bytes < int64_t(sizeof(int4)) || !src || !dst || !stop || !copied || !timeouts || gbps < 0 ||
      !aligned(src, 16) || !aligned(dst, 16))
    return cudaErrorInvalidValue;
  // GB/s is bytes per ns; each block takes its share.
  interfere_kernel<<<unsigned(blocks), kThreads, 0, stream>>>(
      static_cast<const int4*>(src), static_cast<int4*>(dst), bytes / int64_t(sizeof(int4)), stop,
      epoch, gbps / blocks, copied, max_ns, timeouts);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace cs
