// adamw.cu: the AdamW update of many fp32 tensors in one launch per 64
// (kernels.h "adam"), both parameter groups together: a block updates 8,192
// consecutive elements of one tensor, found by a binary search over the
// tensors' first blocks; each thread has two 16-byte loads of each of the four
// tensors in flight where all four pointers are 16-byte aligned, and reads
// them one float at a time (still coalesced) where they are not.
//
// With a copy (kernels.h "adamc"), the job's updated parameter is also
// written rounded to bf16 or fp16, from the registers it is stored from: the
// linear layers' low-precision weights, which the next forward then need not
// cast from a fresh read of the fp32 values (linear_casts.h). A skipped step
// (found_inf) writes no copy either.
//
// Unlike at::_fused_adamw_, the gradient is only read: with a grad_scale
// PyTorch writes the unscaled gradient back, 32 bytes moved per parameter
// against 28 here. The arithmetic is PyTorch's (2.11's fused_adam_utils.cuh,
// ADAMW: everything in float, the hyper-parameters rounded to float first),
// operation for operation; the multiply-add that nvcc contracts there is an
// explicit fma here, so that the results are the same bits whatever this
// file is compiled with (tests/adamw_test.cpp compares them).
#include "common.cuh"

namespace cs {
namespace cuda {
namespace {

// A thread's kUnroll packs of kPack floats a tensor per iteration (one
// 16-byte access each), kIters iterations a block.
constexpr int kThreads = 256, kPack = 4, kUnroll = 2, kIters = 4;
constexpr int kRegion = kThreads * kPack;  // the elements of one pack of every thread
constexpr int kSpan = kRegion * kUnroll;   // the elements of an iteration
constexpr int kK = kPack * kUnroll;        // of which a thread's
constexpr int64_t kChunk = int64_t(kSpan) * kIters;  // the elements of a block
constexpr int kMaxJobs = 64;  // per launch: the batch travels as a kernel argument (< 4 KB)

struct Batch {
  float* param[kMaxJobs];
  const float* grad[kMaxJobs];
  float* exp_avg[kMaxJobs];
  float* exp_avg_sq[kMaxJobs];
  int64_t n[kMaxJobs];
  float lr_wd[kMaxJobs];        // lr * weight_decay in float, as PyTorch's; 0: no decay
  void* copy[kMaxJobs];         // the parameter's bf16 or fp16 copy; null: none
  int64_t first[kMaxJobs + 1];  // the first block of each job; first[count]: all blocks
  float lr, beta1, beta2, eps;
  const float* step;
  const float* grad_scale;  // null: none
  const float* found_inf;   // null: never skip
  int count;
  bool vec[kMaxJobs];
  unsigned char copy_dt[kMaxJobs];  // kNoCopy, kBf16 or kF16
};
constexpr unsigned char kNoCopy = 0, kBf16 = 1, kF16 = 2;
static_assert(sizeof(Batch) <= 4096, "a kernel argument holds at most 4 KB");

// The per-step factors, from the device step counter (already counting this
// step): step_size = lr / (1 - beta1^step), sqrt(1 - beta2^step).
struct Factors {
  float step_size, bc2_sqrt;
};

__device__ Factors factors(const Batch& b) {
  const float step = *b.step;
  const float bc1 = __fsub_rn(1.f, powf(b.beta1, step));
  const float bc2_sqrt = __fsqrt_rn(__fsub_rn(1.f, powf(b.beta2, step)));
  return {__fdiv_rn(b.lr, bc1), bc2_sqrt};
}

// One element: p, m and v updated from g (divided by scale where scaled),
// PyTorch's ADAMW arithmetic: the moments as two fmas each (its lerp).
__device__ __forceinline__ void update(float& p, float g, float& m, float& v, const Batch& b,
                                       float lr_wd, Factors f, bool scaled, float scale) {
  if (scaled) g = __fdiv_rn(g, scale);
  if (lr_wd != 0) p = __fmaf_rn(-lr_wd, p, p);  // p -= lr wd p, contracted by nvcc in PyTorch
  m = __fmaf_rn(b.beta1, m, __fmaf_rn(-b.beta1, g, g));
  const float gg = __fmul_rn(g, g);
  v = __fmaf_rn(b.beta2, v, __fmaf_rn(-b.beta2, gg, gg));
  const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), f.bc2_sqrt), b.eps);
  p = __fsub_rn(p, __fdiv_rn(__fmul_rn(f.step_size, m), denom));
}

// Pack u of a thread's kK values.
__device__ __forceinline__ float (&pack(float (&x)[kK], int u))[kPack] {
  return *reinterpret_cast<float(*)[kPack]>(x + u * kPack);
}

// A thread's kK updated values into the copy as T (rounded to nearest even),
// where they were read from: a pack per kUnroll (packed), else one by one,
// those below n.
template <typename T>
__device__ __forceinline__ void store_copy(void* copy, float (&p)[kK], int64_t start, int64_t n,
                                           bool packed) {
  T* c = static_cast<T*>(copy);
  if (packed) {
#pragma unroll
    for (int u = 0; u < kUnroll; u++)
      store_f<T, kPack>(c + start + u * kRegion + threadIdx.x * kPack, pack(p, u));
    return;
  }
#pragma unroll
  for (int k = 0; k < kK; k++) {
    const int64_t i = start + k * kThreads + threadIdx.x;
    if (i < n) c[i] = from_f<T>(p[k]);
  }
}

// At most 64 registers, so that 4 blocks share a multiprocessor (64 with nvcc
// 11.8 for sm_90 since the copies' stores, 60 before; no spills): 8 loads of 16 bytes in flight a thread, 128 KB
// a multiprocessor, several times the bytes its share of the bandwidth needs
// in flight (Little's law).
__global__ void __launch_bounds__(kThreads, 4) adamw_kernel(const __grid_constant__ Batch b) {
  // A skipped step changes nothing (PyTorch skips at == 1; the flag is 0 or 1).
  if (b.found_inf && *b.found_inf != 0) return;
  __shared__ Factors shared;
  if (threadIdx.x == 0) shared = factors(b);
  const int64_t block = blockIdx.x;
  int lo = 0, hi = b.count - 1;  // the last job whose first block is <= block
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (b.first[mid] <= block)
      lo = mid;
    else
      hi = mid - 1;
  }
  float* param = b.param[lo];
  const float* grad = b.grad[lo];
  float* exp_avg = b.exp_avg[lo];
  float* exp_avg_sq = b.exp_avg_sq[lo];
  const int64_t n = b.n[lo];
  const float lr_wd = b.lr_wd[lo];
  const bool vec = b.vec[lo];
  void* const copy = b.copy[lo];
  const unsigned char copy_dt = b.copy_dt[lo];
  const int64_t base = (block - b.first[lo]) * kChunk;
  __syncthreads();
  const Factors f = shared;
  // Read once: the compiler cannot tell that the stores leave them alone.
  const bool scaled = b.grad_scale != nullptr;
  const float scale = scaled ? *b.grad_scale : 1.f;
  for (int it = 0; it < kIters; it++) {
    const int64_t start = base + int64_t(it) * kSpan;
    if (start >= n) break;
    // Every load of the iteration is issued before any arithmetic: where the
    // pointers are aligned, kUnroll packs of kPack floats a tensor, each one
    // 16-byte access; else (or in a tensor's last kSpan elements) one float
    // at a time, consecutive threads on consecutive elements.
    const bool packed = vec && start + kSpan <= n;
    float p[kK] = {}, g[kK] = {}, m[kK] = {}, v[kK] = {};
    if (packed) {
#pragma unroll
      for (int u = 0; u < kUnroll; u++) {
        const int64_t i = start + u * kRegion + threadIdx.x * kPack;
        load_f<float, kPack>(param + i, pack(p, u));
        load_f<float, kPack>(grad + i, pack(g, u));
        load_f<float, kPack>(exp_avg + i, pack(m, u));
        load_f<float, kPack>(exp_avg_sq + i, pack(v, u));
      }
    } else {
#pragma unroll
      for (int k = 0; k < kK; k++) {
        const int64_t i = start + k * kThreads + threadIdx.x;
        if (i < n) {
          p[k] = param[i];
          g[k] = grad[i];
          m[k] = exp_avg[i];
          v[k] = exp_avg_sq[i];
        }
      }
    }
#pragma unroll
    for (int k = 0; k < kK; k++) update(p[k], g[k], m[k], v[k], b, lr_wd, f, scaled, scale);
    if (packed) {
#pragma unroll
      for (int u = 0; u < kUnroll; u++) {
        const int64_t i = start + u * kRegion + threadIdx.x * kPack;
        store_f<float, kPack>(param + i, pack(p, u));
        store_f<float, kPack>(exp_avg + i, pack(m, u));
        store_f<float, kPack>(exp_avg_sq + i, pack(v, u));
      }
    } else {
#pragma unroll
      for (int k = 0; k < kK; k++) {
        const int64_t i = start + k * kThreads + threadIdx.x;
        if (i < n) {
          param[i] = p[k];
          exp_avg[i] = m[k];
          exp_avg_sq[i] = v[k];
        }
      }
    }
    if (copy_dt == kBf16)
      store_copy<__nv_bfloat16>(copy, p, start, n, packed);
    else if (copy_dt == kF16)
      store_copy<__half>(copy, p, start, n, packed);
  }
}

}  // namespace

cudaError_t adamw_many(const AdamwJob* jobs, int count, const AdamwHyper& h, const float* step,
                       const float* grad_scale, const float* found_inf, cudaStream_t stream) {
  if (count < 0 || !step) return cudaErrorInvalidValue;
  for (int start = 0; start < count; start += kMaxJobs) {
    Batch b{};
    b.count = count - start < kMaxJobs ? count - start : kMaxJobs;
    int64_t blocks = 0;
    for (int j = 0; j < b.count; j++) {
      const AdamwJob& job = jobs[start + j];
      if (job.n < 0 || (job.n > 0 && (!job.param || !job.grad || !job.exp_avg || !job.exp_avg_sq)))
        return cudaErrorInvalidValue;
      if (job.copy && job.copy_dt != DType::BF16 && job.copy_dt != DType::F16)
        return cudaErrorInvalidValue;
      b.param[j] = job.param;
      b.grad[j] = job.grad;
      b.exp_avg[j] = job.exp_avg;
      b.exp_avg_sq[j] = job.exp_avg_sq;
      b.n[j] = job.n;
      // PyTorch skips the decay where the (float) weight decay is 0.
      const float wd = float(job.weight_decay);
      b.lr_wd[j] = wd == 0 ? 0.f : float(h.lr) * wd;
      b.copy[j] = job.copy;
      b.copy_dt[j] = !job.copy ? kNoCopy : job.copy_dt == DType::BF16 ? kBf16 : kF16;
      // A pack of kPack 2-byte values of the copy: 8 bytes.
      b.vec[j] = aligned(job.param, 16) && aligned(job.grad, 16) && aligned(job.exp_avg, 16) &&
                 aligned(job.exp_avg_sq, 16) && aligned(job.copy, 8);
      b.first[j] = blocks;
      blocks += (job.n + kChunk - 1) / kChunk;
    }
    b.first[b.count] = blocks;
    if (blocks == 0) continue;
    b.lr = float(h.lr);
    b.beta1 = float(h.beta1);
    b.beta2 = float(h.beta2);
    b.eps = float(h.eps);
    b.step = step;
    b.grad_scale = grad_scale;
    b.found_inf = found_inf;
    adamw_kernel<<<unsigned(blocks), kThreads, 0, stream>>>(b);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace cuda
}  // namespace cs
