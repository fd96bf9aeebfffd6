// kernels.cuh: the probe's own CUDA kernels: deterministic inputs, the unfused batch-norm passes
// that ConvBNfprop replaces (scale-bias-ReLU apply, per-channel statistics), and the checks.
// NHWC throughout: element i of a tensor with C channels is channel i % C.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace probe {

__device__ inline float tof(__half v) { return __half2float(v); }
__device__ inline float tof(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T>
__device__ inline T fromf(float f);
template <>
__device__ inline __half fromf<__half>(float f) { return __float2half_rn(f); }
template <>
__device__ inline __nv_bfloat16 fromf<__nv_bfloat16>(float f) { return __float2bfloat16_rn(f); }
template <>
__device__ inline float fromf<float>(float f) { return f; }
__device__ inline float tof(float v) { return v; }

// splitmix64 of (seed, i) -> [0, 1).
__device__ inline float uniform01(uint64_t seed, uint64_t i) {
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + i + 0x632BE59BD9B4E019ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)(z >> 40) * (1.0f / 16777216.0f);
}

// p[i] = lo + (hi - lo) u(i), then max(., 0) if relu.
template <typename T>
__global__ void fill(T* p, size_t n, uint64_t seed, float lo, float hi, int relu) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float v = lo + (hi - lo) * uniform01(seed, i);
        p[i] = fromf<T>(relu && v < 0.f ? 0.f : v);
    }
}

template <typename T>
__global__ void absolute(const T* in, T* out, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float v = tof(in[i]);
        out[i] = fromf<T>(v < 0.f ? -v : v);
    }
}

// The unfused forward apply: a = max(x * s[c] + b[c], 0), 8 channels (16 bytes) a thread-step.
// n and C are multiples of 8 (checked by the host).
template <typename T>
__global__ void bn_relu_apply(const T* __restrict__ x, const T* __restrict__ s, const T* __restrict__ b,
                              T* __restrict__ a, size_t n, int C) {
    size_t groups = n / 8;
    for (size_t g = blockIdx.x * (size_t)blockDim.x + threadIdx.x; g < groups; g += (size_t)gridDim.x * blockDim.x) {
        uint4 raw = reinterpret_cast<const uint4*>(x)[g];
        const T* xv = reinterpret_cast<const T*>(&raw);
        uint4 outraw;
        T* ov = reinterpret_cast<T*>(&outraw);
        int c0 = (int)((g * 8) % (size_t)C);
#pragma unroll
        for (int j = 0; j < 8; j++) {
            float v = tof(xv[j]) * tof(s[c0 + j]) + tof(b[c0 + j]);
            ov[j] = fromf<T>(v > 0.f ? v : 0.f);
        }
        reinterpret_cast<uint4*>(a)[g] = outraw;
    }
}

// Per-channel sum, sum of squares and (if sabs) sum of |y| over the rows of y [rows, K].
// blockDim.x == 256 and 256 % K == 0 (checked by the host): 256 / K rows a block-step.
// Acc = float: the unfused statistics pass that is timed; Acc = double: the check's reference.
template <typename T, typename Acc>
__global__ void channel_stats(const T* __restrict__ y, int64_t rows, int K, Acc* sum, Acc* sq, Acc* sabs) {
    __shared__ Acc sh[3][256];
    int c = threadIdx.x % K, r0 = threadIdx.x / K, per = blockDim.x / K;
    Acc s = 0, q = 0, a = 0;
    for (int64_t r = (int64_t)blockIdx.x * per + r0; r < rows; r += (int64_t)gridDim.x * per) {
        Acc v = (Acc)tof(y[r * K + c]);
        s += v;
        q += v * v;
        a += v < 0 ? -v : v;
    }
    sh[0][threadIdx.x] = s;
    sh[1][threadIdx.x] = q;
    sh[2][threadIdx.x] = a;
    __syncthreads();
    if (r0 == 0) {
        for (int j = 1; j < per; j++) {
            s += sh[0][threadIdx.x + j * K];
            q += sh[1][threadIdx.x + j * K];
            a += sh[2][threadIdx.x + j * K];
        }
        atomicAdd(&sum[c], s);
        atomicAdd(&sq[c], q);
        if (sabs) atomicAdd(&sabs[c], a);
    }
}

// Elementwise check of y against ref: |y - ref| <= 2u |ref| + acc S, S = conv(|a|, |w|), acc
// the prologue's and the fp32 sums' share (see probe.cu for the bound). Counts violations (NaN counts) and keeps the largest ratio.
template <typename T>
__global__ void check_close(const T* y, const T* ref, const T* S, size_t n, float u, float acc,
                            unsigned long long* bad, unsigned int* max_ratio_bits) {
    float worst = 0.f;
    unsigned long long nbad = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float a = tof(y[i]), b = tof(ref[i]), s = tof(S[i]);
        float tol = 2.f * u * fabsf(b) + acc * s + 1e-30f;
        float r = fabsf(a - b) / tol;
        if (!(r <= 1.f)) nbad++;
        if (r > worst) worst = r;
        if (r != r) worst = 3.0e38f;
    }
    if (nbad) atomicAdd(bad, nbad);
    atomicMax(max_ratio_bits, __float_as_uint(worst));  // non-negative floats order as their bits
}

// Widens n elements to float (the host reads the probe's outputs as floats).
template <typename T>
__global__ void widen(const T* in, float* out, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = tof(in[i]);
}

// The float64 weight gradient at sampled filter elements (one block each; idx: flat KRSC indices
// of dw [K, R, R, C]): dw = sum over n, p, q of act(x[n, p+r-pad, q+s-pad, c]) * dy[n, p, q, k],
// act(v) = the unfused apply's ReLU(v s[c] + b[c]) rounded to T when prologue, else v itself.
// out[2 i] = the sum, out[2 i + 1] = the sum of the terms' squares (the bound's scale).
template <typename T>
__global__ void wgrad_ref(const T* x, const T* s, const T* b, const T* dy, int N, int HW, int C, int K, int R,
                          int pad, const int64_t* idx, int prologue, double* out) {
    __shared__ double sh[2][256];
    int64_t e = idx[blockIdx.x];
    int c = (int)(e % C);
    int64_t t = e / C;
    int sx = (int)(t % R);
    t /= R;
    int r = (int)(t % R);
    int k = (int)(t / R);
    float sc = prologue ? tof(s[c]) : 1.f, bc = prologue ? tof(b[c]) : 0.f;
    double acc = 0, acc2 = 0;
    int64_t positions = (int64_t)N * HW * HW;
    for (int64_t pos = threadIdx.x; pos < positions; pos += blockDim.x) {
        int q = (int)(pos % HW);
        int64_t t2 = pos / HW;
        int p = (int)(t2 % HW);
        int64_t n = t2 / HW;
        int hh = p + r - pad, ww = q + sx - pad;
        if (hh < 0 || hh >= HW || ww < 0 || ww >= HW) continue;
        float v = tof(x[((n * HW + hh) * HW + ww) * C + c]);
        float av = prologue ? tof(fromf<T>(fmaxf(v * sc + bc, 0.f))) : v;
        double term = (double)av * (double)tof(dy[pos * K + k]);
        acc += term;
        acc2 += term * term;
    }
    sh[0][threadIdx.x] = acc;
    sh[1][threadIdx.x] = acc2;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w) {
            sh[0][threadIdx.x] += sh[0][threadIdx.x + w];
            sh[1][threadIdx.x] += sh[1][threadIdx.x + w];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        out[2 * blockIdx.x] = sh[0][0];
        out[2 * blockIdx.x + 1] = sh[1][0];
    }
}

// Batch norm's backward sums over g [rows, C] and its input x: out[c] = sum g, out[C + c] =
// sum g x^, out[2C + c] = sum |g|, out[3C + c] = sum |g x^|, with x^ = (x - mean) invstd. When
// mask, g is first zeroed where the forward's ReLU was off (bn = x^ s + b <= 0): the unfused
// path's dReLU + reduction over the plain data gradient; without it g is taken as it is.
// blockDim.x == 256 and 256 % C == 0 (checked by the host).
template <typename T, typename Acc>
__global__ void bn_bwd_sums(const T* __restrict__ g, const T* __restrict__ x, const float* mean, const float* invstd,
                            const float* s, const float* b, int64_t rows, int C, int mask, Acc* out) {
    __shared__ Acc sh[4][256];
    int c = threadIdx.x % C, r0 = threadIdx.x / C, per = blockDim.x / C;
    float mu = mean[c], is = invstd[c], sc = s[c], bc = b[c];
    Acc a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    for (int64_t r = (int64_t)blockIdx.x * per + r0; r < rows; r += (int64_t)gridDim.x * per) {
        float xh = (tof(x[r * C + c]) - mu) * is;
        float gv = tof(g[r * C + c]);
        if (mask && !(xh * sc + bc > 0.f)) gv = 0.f;
        Acc gx = (Acc)gv * (Acc)xh;
        a0 += gv;
        a1 += gx;
        a2 += gv < 0 ? -(Acc)gv : (Acc)gv;
        a3 += gx < 0 ? -gx : gx;
    }
    sh[0][threadIdx.x] = a0;
    sh[1][threadIdx.x] = a1;
    sh[2][threadIdx.x] = a2;
    sh[3][threadIdx.x] = a3;
    __syncthreads();
    if (r0 == 0) {
        for (int j = 1; j < per; j++) {
            a0 += sh[0][threadIdx.x + j * C];
            a1 += sh[1][threadIdx.x + j * C];
            a2 += sh[2][threadIdx.x + j * C];
            a3 += sh[3][threadIdx.x + j * C];
        }
        atomicAdd(&out[c], a0);
        atomicAdd(&out[C + c], a1);
        atomicAdd(&out[2 * C + c], a2);
        atomicAdd(&out[3 * C + c], a3);
    }
}

// Elementwise check of the fused dReLU output gf against the plain data gradient gx, masked by
// the forward's ReLU (or not, for the negative control): |gf - ref| <= 2u|ref| + acc S, S the
// data gradient of |dy| and |W| (each side rounds once; fp32 sums of K R S products). Elements
// whose batch-norm output is within 1e-5 of the ReLU's edge (relative) are skipped and counted:
// the two sides may compute it a rounding apart and switch the mask.
template <typename T>
__global__ void check_drelu(const T* gf, const T* gx, const T* S, const T* x, const float* mean, const float* invstd,
                            const float* s, const float* b, size_t n, int C, int mask, float u, float acc,
                            unsigned long long* counts, unsigned int* max_ratio_bits) {
    float worst = 0.f;
    unsigned long long nbad = 0, nskip = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        int c = (int)(i % (size_t)C);
        float xh = (tof(x[i]) - mean[c]) * invstd[c];
        float bn = xh * s[c] + b[c];
        if (mask && fabsf(bn) <= 1e-5f * (fabsf(xh * s[c]) + fabsf(b[c]))) {
            nskip++;
            continue;
        }
        bool on = !mask || bn > 0.f;
        float ref = on ? tof(gx[i]) : 0.f, sv = on ? tof(S[i]) : 0.f;
        float tol = 2.f * u * fabsf(ref) + acc * sv + 1e-30f;
        float r = fabsf(tof(gf[i]) - ref) / tol;
        if (!(r <= 1.f)) nbad++;
        if (r > worst) worst = r;
        if (r != r) worst = 3.0e38f;
    }
    if (nbad) atomicAdd(&counts[0], nbad);
    if (nskip) atomicAdd(&counts[1], nskip);
    atomicMax(max_ratio_bits, __float_as_uint(worst));
}

}  // namespace probe
