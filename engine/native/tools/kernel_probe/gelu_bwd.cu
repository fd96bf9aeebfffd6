// gelu_bwd.cu: where the engine's GELU backward (bias_act_bwd, act GeluErf:
// dz = dy gelu'(z) and the bias gradient, BERT's intermediate layer) loses
// against the memory bandwidth (docs/perf.md, "Twenty-fourth session": 0.182 ms
// a call at 16,384 x 4,096 bf16 on an H100 in the profile, kernel alone, 2.21
// TB/s, where torch's GELU forward reaches 2.86 TB/s). Times with CUDA events,
// at one shape, each sample REPS back-to-back calls between one pair of events
// (the host's launch gaps hidden), the median of ITERS samples after WARMUP:
//   engine-erf    the engine's kernel and its column sum, as BERT calls it
//   engine-tanh   the same with GPT-2's tanh GELU
//   engine-none   the same kernel without an activation: it reads dy only (no
//                 z, no dz written), so a read-only bandwidth figure, not the
//                 erf kernel's structure
//   ew-copy       a plain elementwise kernel with the erf kernel's traffic
//                 (read dy and z, write dz = dy * z): what this traffic reaches
//   ew-erf        that kernel with the erf GELU's derivative (no bias sum)
// Reading: ew-erf against ew-copy is the math's cost where nothing else
// limits; engine-erf against ew-erf is the cost of the engine kernel's
// structure (its occupancy, row walk, partial sums and column sum) at the
// same math. Not part of `make engine`: tools/kernel_probe/build.sh builds it
// against the engine's CUDA sources.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common.cuh"
#include "gelu.h"
#include "kernels_cuda.h"

namespace {

void cu(cudaError_t e, const char* what, int line) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "gelu_bwd_probe: %s (line %d): %s\n", what, line, cudaGetErrorString(e));
  std::exit(2);
}
#define CU(x) cu((x), #x, __LINE__)

using T = __nv_bfloat16;
using cs::kern::Act;

template <Act A>
__global__ void ew_kernel(const uint4* __restrict__ dy, const uint4* __restrict__ z,
                          uint4* __restrict__ dz, int64_t n8) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n8;
       i += int64_t(gridDim.x) * blockDim.x) {
    const uint4 g = dy[i], v = z[i];
    const T* gp = reinterpret_cast<const T*>(&g);
    const T* vp = reinterpret_cast<const T*>(&v);
    uint4 o;
    T* op = reinterpret_cast<T*>(&o);
#pragma unroll
    for (int k = 0; k < 8; k++) {
      const float a = __bfloat162float(gp[k]), b = __bfloat162float(vp[k]);
      op[k] = __float2bfloat16(A == Act::None ? a * b : a * cs::kern::act_grad(b, A));
    }
    dz[i] = o;
  }
}

struct Args {
  int64_t rows = 32 * 512, C = 4096;
  int iters = 30, warmup = 5, reps = 10;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; i++) {
    const std::string s = argv[i];
    auto val = [&](const char* flag) -> const char* {
      if (s != flag || i + 1 >= argc) return nullptr;
      return argv[++i];
    };
    if (const char* v = val("--rows")) a.rows = std::atoll(v);
    else if (const char* v = val("--cols")) a.C = std::atoll(v);
    else if (const char* v = val("--iters")) a.iters = std::atoi(v);
    else if (const char* v = val("--warmup")) a.warmup = std::atoi(v);
    else if (const char* v = val("--reps")) a.reps = std::atoi(v);
    else {
      std::fprintf(stderr, "gelu_bwd_probe: unknown argument %s (--rows N --cols C --iters N --warmup N --reps N)\n", s.c_str());
      std::exit(2);
    }
  }
  if (a.rows < 1 || a.C < 8 || a.C % 8 || a.iters < 1 || a.warmup < 0 || a.reps < 1) {
    std::fprintf(stderr, "gelu_bwd_probe: want rows >= 1, cols a multiple of 8, iters and reps >= 1\n");
    std::exit(2);
  }
  return a;
}

// Median and range of `iters` samples of f's time a call, each `reps` calls
// back to back between two events, after `warmup` untimed calls.
template <class F>
void timed(const char* name, const Args& a, double bytes, F f) {
  cudaEvent_t e0, e1;
  CU(cudaEventCreate(&e0));
  CU(cudaEventCreate(&e1));
  for (int i = 0; i < a.warmup; i++) CU(f());
  std::vector<float> ms;
  for (int i = 0; i < a.iters; i++) {
    CU(cudaEventRecord(e0));
    for (int r = 0; r < a.reps; r++) CU(f());
    CU(cudaEventRecord(e1));
    CU(cudaEventSynchronize(e1));
    float t = 0;
    CU(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t / a.reps);
  }
  std::sort(ms.begin(), ms.end());
  const float med = ms[ms.size() / 2];
  std::printf("%-12s median %.4f ms (min %.4f, max %.4f), %.0f MB, %.2f TB/s\n", name, med, ms.front(),
              ms.back(), bytes / 1e6, bytes / (med * 1e-3) / 1e12);
  CU(cudaEventDestroy(e0));
  CU(cudaEventDestroy(e1));
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  const int64_t n = a.rows * a.C;
  cudaDeviceProp p{};
  CU(cudaGetDeviceProperties(&p, 0));
  std::printf("gelu_bwd_probe: %s, %d SMs; %lld x %lld bf16, %d samples of %d calls after %d\n", p.name,
              p.multiProcessorCount, (long long)a.rows, (long long)a.C, a.iters, a.reps, a.warmup);
  T *dy, *z, *dz;
  float *db, *scratch;
  CU(cudaMalloc(&dy, n * sizeof(T)));
  CU(cudaMalloc(&z, n * sizeof(T)));
  CU(cudaMalloc(&dz, n * sizeof(T)));
  CU(cudaMalloc(&db, a.C * sizeof(float)));
  CU(cudaMalloc(&scratch, cs::cuda::bias_act_bwd_scratch(a.rows, a.C) * sizeof(float)));
  {  // values of a pre-activation's size: z ~ N(0, 1)-like, dy small
    std::vector<T> h(n);
    uint32_t s = 12345;
    auto u = [&] { s = s * 1664525u + 1013904223u; return (s >> 8) * (1.f / 16777216.f); };
    for (int64_t i = 0; i < n; i++) h[i] = __float2bfloat16(4.f * (u() - 0.5f));
    CU(cudaMemcpy(z, h.data(), n * sizeof(T), cudaMemcpyHostToDevice));
    for (int64_t i = 0; i < n; i++) h[i] = __float2bfloat16(1e-3f * (u() - 0.5f));
    CU(cudaMemcpy(dy, h.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  }
  const double three = 3.0 * n * sizeof(T), one = 1.0 * n * sizeof(T);
  auto engine = [&](Act act) {
    return [&, act] {
      return cs::cuda::bias_act_bwd(dy, z, dz, db, scratch, cs::cuda::DType::BF16, act, a.rows, a.C, 0);
    };
  };
  timed("engine-erf", a, three, engine(Act::GeluErf));
  timed("engine-tanh", a, three, engine(Act::GeluTanh));
  timed("engine-none", a, one, engine(Act::None));  // reads dy only: dz is dy itself
  const int64_t n8 = n / 8;
  const int blocks = p.multiProcessorCount * 8, threads = 256;
  auto ew = [&](auto kernel) {
    return [&, kernel] {
      kernel<<<blocks, threads>>>(reinterpret_cast<const uint4*>(dy), reinterpret_cast<const uint4*>(z),
                                  reinterpret_cast<uint4*>(dz), n8);
      return cudaGetLastError();
    };
  };
  timed("ew-copy", a, three, ew(ew_kernel<Act::None>));
  timed("ew-erf", a, three, ew(ew_kernel<Act::GeluErf>));
  CU(cudaDeviceSynchronize());
  return 0;
}
