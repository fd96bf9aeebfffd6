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
// same math. Then, erf at this shape and tanh at GPT-2's (--tanh-cols, 3072),
// the engine's kernel ("engine", as above) and shapes.cuh's rewrite of it in
// block shapes (BXxRY uU bB: threads across the
// columns and down the rows, rows each thread loads before it computes,
// blocks a multiprocessor), each checked against the engine's own output (dz
// bit for bit, db to fp32 summation order) before it is timed. Not part of
// `make engine`: tools/kernel_probe/build.sh builds it against the engine's
// CUDA sources.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "shapes.cuh"
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
  int64_t rows = 32 * 512, C = 4096, tanh_C = 3072;
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
    else if (const char* v = val("--tanh-cols")) a.tanh_C = std::atoll(v);
    else if (const char* v = val("--iters")) a.iters = std::atoi(v);
    else if (const char* v = val("--warmup")) a.warmup = std::atoi(v);
    else if (const char* v = val("--reps")) a.reps = std::atoi(v);
    else {
      std::fprintf(stderr, "gelu_bwd_probe: unknown argument %s (--rows N --cols C --tanh-cols C --iters N --warmup N --reps N)\n", s.c_str());
      std::exit(2);
    }
  }
  if (a.rows < 1 || a.C < 8 || a.C % 8 || a.tanh_C < 8 || a.tanh_C % 8 || a.tanh_C > a.C || a.iters < 1 ||
      a.warmup < 0 || a.reps < 1) {
    std::fprintf(stderr, "gelu_bwd_probe: want rows >= 1, cols multiples of 8 (tanh-cols <= cols), iters and reps >= 1\n");
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


// The engine's own output for act at rows x C (its Default shape), on the
// host: what every shape must reproduce.
struct Ref {
  std::vector<uint16_t> dz;
  std::vector<float> db;
  std::vector<double> mag;  // each column's sum of |dz|: the scale of db's summation-order error
};

// A kernel f writing dz and db: checked against ref (dz bit for bit, db
// within fp32 summation-order error of the column's absolute sum), then
// timed; a mismatch exits 1.
template <class F>
void checked(const char* name, const Args& a, int64_t C, T* dz, float* db, float* scratch, const Ref& ref, F f) {
  const int64_t n = a.rows * C;
  // Poisoned first (NaN bits), so that an element or partial a shape fails to
  // write cannot pass on what the kernel before it left.
  CU(cudaMemset(dz, 0xFF, n * sizeof(T)));
  CU(cudaMemset(db, 0xFF, C * sizeof(float)));
  CU(cudaMemset(scratch, 0xFF, a.rows * C * sizeof(float)));
  CU(f());
  CU(cudaDeviceSynchronize());
  std::vector<uint16_t> hz(n);
  std::vector<float> hb(C);
  CU(cudaMemcpy(hz.data(), dz, n * sizeof(T), cudaMemcpyDeviceToHost));
  CU(cudaMemcpy(hb.data(), db, C * sizeof(float), cudaMemcpyDeviceToHost));
  if (std::memcmp(hz.data(), ref.dz.data(), n * sizeof(T)) != 0) {
    std::fprintf(stderr, "gelu_bwd_probe: %s: dz differs from the engine's\n", name);
    std::exit(1);
  }
  double worst = 0;
  bool unwritten = false;  // NaN: a column (or a partial of it) the shape never wrote
  for (int64_t c = 0; c < C; c++) {
    const double e = std::fabs(double(hb[c]) - ref.db[c]) / (ref.mag[c] > 0 ? ref.mag[c] : 1);
    if (std::isnan(e)) unwritten = true;
    else if (e > worst) worst = e;
  }
  if (unwritten || worst > 1e-5) {
    std::fprintf(stderr, "gelu_bwd_probe: %s: db differs from the engine's by %.3g of the column's |dz| sum%s\n", name, worst,
                 unwritten ? " (and a column not written)" : "");
    std::exit(1);
  }
  timed(name, a, 3.0 * n * sizeof(T), f);
}

Ref reference(const Args& a, int64_t C, Act act, const T* dy, const T* z, T* dz, float* db, float* scratch) {
  const int64_t n = a.rows * C;
  CU(cs::cuda::bias_act_bwd(dy, z, dz, db, scratch, cs::cuda::DType::BF16, act, a.rows, C, 0));
  CU(cudaDeviceSynchronize());
  Ref r{std::vector<uint16_t>(n), std::vector<float>(C), std::vector<double>(C, 0.0)};
  CU(cudaMemcpy(r.dz.data(), dz, n * sizeof(T), cudaMemcpyDeviceToHost));
  CU(cudaMemcpy(r.db.data(), db, C * sizeof(float), cudaMemcpyDeviceToHost));
  for (int64_t i = 0; i < n; i++) {  // bf16 bits are a float's upper half
    const uint32_t bits = uint32_t(r.dz[i]) << 16;
    float v;
    std::memcpy(&v, &bits, 4);
    r.mag[i % C] += std::fabs(v);
  }
  return r;
}

// One shape of shapes.cuh's kernel.
template <class S>
void shape(const char* name, const Args& a, int64_t C, Act act, const T* dy, const T* z, T* dz, float* db,
           float* scratch, const Ref& ref) {
  checked(name, a, C, dz, db, scratch, ref,
          [&] { return cs::cuda::bias_act::run_rows<S, T>(dy, z, dz, db, scratch, act, a.rows, C, 0); });
}

// shapes.cuh's shapes at one activation and width, after the engine's kernel.
void shapes(const char* act_name, const Args& a, int64_t C, Act act, const T* dy, const T* z, T* dz, float* db,
            float* scratch) {
  namespace ba = cs::cuda::bias_act;
  const Ref ref = reference(a, C, act, dy, z, dz, db, scratch);
  std::printf("%s at %lld x %lld:\n", act_name, (long long)a.rows, (long long)C);
  checked("engine", a, C, dz, db, scratch, ref, [&] {
    return cs::cuda::bias_act_bwd(dy, z, dz, db, scratch, cs::cuda::DType::BF16, act, a.rows, C, 0);
  });
  shape<ba::Shape<32, 8, 2, 4>>("32x8 u2 b4", a, C, act, dy, z, dz, db, scratch, ref);
  shape<ba::Shape<32, 8, 4, 2>>("32x8 u4 b2", a, C, act, dy, z, dz, db, scratch, ref);
  shape<ba::Shape<64, 4, 4, 2>>("64x4 u4 b2", a, C, act, dy, z, dz, db, scratch, ref);
  shape<ba::Shape<64, 4, 2, 4>>("64x4 u2 b4", a, C, act, dy, z, dz, db, scratch, ref);
  shape<ba::Shape<128, 2, 2, 4>>("128x2 u2 b4", a, C, act, dy, z, dz, db, scratch, ref);
  shape<ba::Shape<128, 1, 4, 4>>("128x1 u4 b4", a, C, act, dy, z, dz, db, scratch, ref);
  shape<ba::Shape<256, 1, 2, 4>>("256x1 u2 b4", a, C, act, dy, z, dz, db, scratch, ref);
  shape<ba::Shape<256, 1, 1, 8>>("256x1 u1 b8", a, C, act, dy, z, dz, db, scratch, ref);
  shape<ba::Shape<256, 1, 4, 2>>("256x1 u4 b2", a, C, act, dy, z, dz, db, scratch, ref);
  shape<ba::Shape<512, 1, 2, 2>>("512x1 u2 b2", a, C, act, dy, z, dz, db, scratch, ref);
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
  // Scratch for every shape: at most a partial per row and column.
  CU(cudaMalloc(&scratch, a.rows * a.C * sizeof(float)));
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
  shapes("erf", a, a.C, Act::GeluErf, dy, z, dz, db, scratch);
  shapes("tanh", a, a.tanh_C, Act::GeluTanh, dy, z, dz, db, scratch);
  CU(cudaDeviceSynchronize());
  return 0;
}
