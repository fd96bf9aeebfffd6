// fp8_cast.cu: precision fp8's operand quantization (fp8_linear.cpp, kernels.h
// "fp8cast"): the amax of a bf16, fp16 or fp32 matrix (all of it, each row or
// each column) into device floats in one read, then the scale and the cast to
// float8 e4m3 or e5m2 in a second read, the scale computed from that amax on
// the device (no host sync: graph-capturable), writing the row-major copy,
// its transpose, or both from the same read (TransformerEngine's
// cast_transpose: the backward needs no transposing copy of its own).
//
// The arithmetic is fp8_linear.cpp's ATen recipe to the bit: amax clamped to
// at least 1e-12 (NaN kept), scale = RN(RN(1 / amax) * fmax), q = the FP8
// value nearest (ties to even) to RN(x * scale); inv = RN(amax * RN(1 / fmax))
// (ATen divides by a scalar as a product with its reciprocal). Amax is a
// maximum of |x|'s bit patterns, exact and order-free (atomicMax across
// blocks is deterministic); a NaN's pattern lies above inf's, so NaN wins.
#include <cuda_fp8.h>

#include "common.cuh"

namespace cs {
namespace cuda {
namespace {

constexpr int kThreads = 256, kPer = 8;
constexpr int kTile = 64;        // the cast's tile: 64 rows x 64 columns, one block
constexpr int kColRows = 256;    // the rows one block of the column amax covers
constexpr float kAmaxMin = 1e-12f;

__device__ __forceinline__ unsigned abs_bits(float v) { return __float_as_uint(v) & 0x7fffffffu; }
__device__ __forceinline__ unsigned umax(unsigned a, unsigned b) { return a > b ? a : b; }

__device__ __forceinline__ unsigned warp_umax(unsigned v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = umax(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// amax[0] (as bits, zeroed before) = max |x| over n elements: a grid-stride
// loop, 8 elements a load where vec, one atomicMax a block.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    amax_all_kernel(const T* __restrict__ x, int64_t n, bool vec, unsigned* __restrict__ out) {
  unsigned m = 0;
  const int64_t stride = int64_t(gridDim.x) * kThreads;
  int64_t tail = 0;
  if (vec) {
    const int64_t nv = n / kPer;
    for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < nv; i += stride) {
      float v[kPer];
      load_f<T, kPer>(x + i * kPer, v);
#pragma unroll
      for (int k = 0; k < kPer; k++) m = umax(m, abs_bits(v[k]));
    }
    tail = nv * kPer;
  }
  for (int64_t i = tail + int64_t(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride)
    m = umax(m, abs_bits(to_f<T>(x[i])));
  m = warp_umax(m);
  __shared__ unsigned sm[kThreads / 32];
  if (threadIdx.x % 32 == 0) sm[threadIdx.x / 32] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
#pragma unroll
    for (int w = 1; w < kThreads / 32; w++) m = umax(m, sm[w]);
    atomicMax(out, m);
  }
}

// out[r] = max |x[r, :]|: one warp a row (vec: 8 elements a load; needs cols
// a multiple of 8 and x aligned to 8 elements).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    amax_rows_kernel(const T* __restrict__ x, int64_t rows, int64_t cols, bool vec, float* __restrict__ out) {
  const int64_t row = (int64_t(blockIdx.x) * kThreads + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;  // the whole warp: row is the same for its 32 lanes
  const T* p = x + row * cols;
  unsigned m = 0;
  if (vec) {
    for (int64_t c = int64_t(lane) * kPer; c < cols; c += 32 * kPer) {
      float v[kPer];
      load_f<T, kPer>(p + c, v);
#pragma unroll
      for (int k = 0; k < kPer; k++) m = umax(m, abs_bits(v[k]));
    }
  } else {
    for (int64_t c = lane; c < cols; c += 32) m = umax(m, abs_bits(to_f<T>(p[c])));
  }
  m = warp_umax(m);
  if (lane == 0) out[row] = __uint_as_float(m);
}

// out[c] (as bits, zeroed before) = max |x[:, c]|: a block covers 32 columns
// (threadIdx.x) of kColRows rows, 8 threads down the rows (threadIdx.y), one
// atomicMax per column.
template <typename T>
__global__ void __launch_bounds__(32 * 8)
    amax_cols_kernel(const T* __restrict__ x, int64_t rows, int64_t cols, unsigned* __restrict__ out) {
  __shared__ unsigned sm[8][32];
  const int64_t c = int64_t(blockIdx.x) * 32 + threadIdx.x;
  const int64_t r0 = int64_t(blockIdx.y) * kColRows;
  const int64_t r1 = r0 + kColRows < rows ? r0 + kColRows : rows;
  unsigned m = 0;
  if (c < cols)
    for (int64_t r = r0 + threadIdx.y; r < r1; r += 8) m = umax(m, abs_bits(to_f<T>(x[r * cols + c])));
  sm[threadIdx.y][threadIdx.x] = m;
  __syncthreads();
  if (threadIdx.y != 0 || c >= cols) return;
#pragma unroll
  for (int k = 1; k < 8; k++) m = umax(m, sm[k][threadIdx.x]);
  atomicMax(out + c, m);
}

template <bool E5M2>
__device__ __forceinline__ uint8_t to_fp8(float v) {
  // Finite values beyond the format's largest are never formed here (|x| <=
  // amax, so |x * scale| <= fmax up to one rounding, which rounds to fmax);
  // satfinite lets the conversion run as one instruction on sm_89+.
  return __nv_cvt_float_to_fp8(v, __NV_SATFINITE, E5M2 ? __NV_E5M2 : __NV_E4M3);
}

// The amax clamped as the ATen recipe's clamp_min(1e-12) (a NaN stays NaN).
__device__ __forceinline__ float clamp_amax(float a) { return a < kAmaxMin ? kAmaxMin : a; }

// One 64 x 64 tile of x [rows, cols] (row-major) per block: each warp reads
// rows of the tile, two elements a lane, scales and casts them, writes q's
// row and keeps the bytes in shared memory; then each warp writes rows of qt
// [cols, rows] (the tile's columns), two bytes a lane. The scales of the
// tile's rows (Rows), columns (Cols) or the one scale (Tensor) are computed
// first; the blocks of the first tile column (Rows), first tile row (Cols) or
// the first block (Tensor) also write inv. vec: pairs of elements and bytes
// at once (rows and cols even, pointers aligned to pairs).
template <typename T, bool E5M2>
__global__ void __launch_bounds__(kThreads)
    cast_kernel(const T* __restrict__ x, int64_t rows, int64_t cols, int axis,
                const float* __restrict__ amax, float fmax, float inv_fmax, bool vec,
                uint8_t* __restrict__ q, uint8_t* __restrict__ qt, float* __restrict__ inv) {
  __shared__ uint8_t tile[kTile][kTile + 4];
  __shared__ float s_scale[kTile];
  const int64_t r0 = int64_t(blockIdx.x) * kTile, c0 = int64_t(blockIdx.y) * kTile;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int kRowsAxis = int(Fp8Axis::Rows), kColsAxis = int(Fp8Axis::Cols);
  if (tid < kTile) {
    const int64_t i = axis == kRowsAxis ? r0 + tid : axis == kColsAxis ? c0 + tid : 0;
    const int64_t n = axis == kRowsAxis ? rows : axis == kColsAxis ? cols : 1;
    float s = 0.f;
    if (i < n) {
      const float a = clamp_amax(amax[i]);
      s = __fmul_rn(__frcp_rn(a), fmax);
      const bool writer = axis == kRowsAxis   ? blockIdx.y == 0
                          : axis == kColsAxis ? blockIdx.x == 0
                                              : (blockIdx.x == 0 && blockIdx.y == 0 && tid == 0);
      if (inv && writer) inv[i] = __fmul_rn(a, inv_fmax);
    }
    s_scale[tid] = s;
  }
  __syncthreads();
  const int cc = 2 * lane;
  const int64_t c = c0 + cc;
  for (int rr = warp; rr < kTile; rr += kThreads / 32) {
    const int64_t r = r0 + rr;
    uint8_t b0 = 0, b1 = 0;
    if (r < rows && c < cols) {
      const T* src = x + r * cols + c;
      float v0, v1 = 0.f;
      if (vec) {
        const Pack<T, 2> pk = *reinterpret_cast<const Pack<T, 2>*>(src);
        v0 = to_f<T>(pk.v[0]);
        v1 = to_f<T>(pk.v[1]);
      } else {
        v0 = to_f<T>(src[0]);
        if (c + 1 < cols) v1 = to_f<T>(src[1]);
      }
      const float s0 = s_scale[axis == kRowsAxis ? rr : axis == kColsAxis ? cc : 0];
      const float s1 = s_scale[axis == kRowsAxis ? rr : axis == kColsAxis ? cc + 1 : 0];
      b0 = to_fp8<E5M2>(__fmul_rn(v0, s0));
      b1 = to_fp8<E5M2>(__fmul_rn(v1, s1));
      if (q) {
        uint8_t* dst = q + r * cols + c;
        if (vec) {
          *reinterpret_cast<uint16_t*>(dst) = uint16_t(b0) | uint16_t(uint16_t(b1) << 8);
        } else {
          dst[0] = b0;
          if (c + 1 < cols) dst[1] = b1;
        }
      }
    }
    tile[rr][cc] = b0;
    tile[rr][cc + 1] = b1;
  }
  if (!qt) return;  // the same for every thread of the block
  __syncthreads();
  const int rr = 2 * lane;
  const int64_t r = r0 + rr;
  for (int tc = warp; tc < kTile; tc += kThreads / 32) {
    const int64_t col = c0 + tc;
    if (col >= cols || r >= rows) continue;
    uint8_t* dst = qt + col * rows + r;
    if (vec) {
      *reinterpret_cast<uint16_t*>(dst) = uint16_t(tile[rr][tc]) | uint16_t(uint16_t(tile[rr + 1][tc]) << 8);
    } else {
      dst[0] = tile[rr][tc];
      if (r + 1 < rows) dst[1] = tile[rr + 1][tc];
    }
  }
}

int64_t elem_size(DType t) { return t == DType::F32 ? 4 : 2; }

}  // namespace

cudaError_t fp8_amax(const void* x, DType t, int64_t rows, int64_t cols, Fp8Axis axis, float* amax,
                     cudaStream_t stream) {
  if (rows < 0 || cols < 0 || !amax || (rows * cols > 0 && !x)) return cudaErrorInvalidValue;
  const int64_t n = rows * cols;
  if (axis == Fp8Axis::Rows) {
    if (rows == 0) return cudaSuccess;
    if (cols == 0) return cudaMemsetAsync(amax, 0, size_t(rows) * sizeof(float), stream);
    const int64_t blocks = (rows * 32 + kThreads - 1) / kThreads;
    if (blocks > int64_t(0x7fffffff)) return cudaErrorInvalidValue;
    const bool vec = cols % kPer == 0 && aligned(x, kPer * elem_size(t));
    CS_DISPATCH(t, T,
                amax_rows_kernel<T><<<unsigned(blocks), kThreads, 0, stream>>>(
                    static_cast<const T*>(x), rows, cols, vec, amax));
    return cudaGetLastError();
  }
  const int64_t outs = axis == Fp8Axis::Cols ? cols : 1;
  if (outs == 0) return cudaSuccess;
  cudaError_t e = cudaMemsetAsync(amax, 0, size_t(outs) * sizeof(float), stream);
  if (e != cudaSuccess || n == 0) return e;
  unsigned* bits = reinterpret_cast<unsigned*>(amax);
  if (axis == Fp8Axis::Cols) {
    const int64_t gy = (rows + kColRows - 1) / kColRows;
    if (gy > 65535) return cudaErrorInvalidValue;
    const dim3 grid(unsigned((cols + 31) / 32), unsigned(gy));
    CS_DISPATCH(t, T,
                amax_cols_kernel<T><<<grid, dim3(32, 8), 0, stream>>>(static_cast<const T*>(x), rows,
                                                                      cols, bits));
    return cudaGetLastError();
  }
  const bool vec = aligned(x, kPer * elem_size(t));
  CS_DISPATCH(t, T, constexpr auto kernel = amax_all_kernel<T>;
              kernel<<<grid_stride_blocks<kernel>(vec ? n / kPer : n, kThreads), kThreads, 0, stream>>>(
                  static_cast<const T*>(x), n, vec, bits));
  return cudaGetLastError();
}

cudaError_t fp8_cast(const void* x, DType t, int64_t rows, int64_t cols, Fp8Axis axis,
                     const float* amax, Fp8Format f, uint8_t* q, uint8_t* qt, float* inv,
                     cudaStream_t stream) {
  if (rows < 0 || cols < 0 || !amax || (rows * cols > 0 && !x)) return cudaErrorInvalidValue;
  if (rows == 0 || cols == 0) return cudaSuccess;
  const int64_t gx = (rows + kTile - 1) / kTile, gy = (cols + kTile - 1) / kTile;
  if (gx > int64_t(0x7fffffff) || gy > 65535) return cudaErrorInvalidValue;
  const bool e5m2 = f == Fp8Format::E5M2;
  // The recipe's constants as fp32 (ATen rounds the double scalars so).
  const float fmax = e5m2 ? 57344.f : 448.f;
  const float inv_fmax = 1.0f / fmax;
  const bool vec = rows % 2 == 0 && cols % 2 == 0 && aligned(x, 2 * elem_size(t)) && aligned(q, 2) &&
                   aligned(qt, 2);
  const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(gy));
  CS_DISPATCH(t, T, {
    if (e5m2)
      cast_kernel<T, true><<<grid, kThreads, 0, stream>>>(static_cast<const T*>(x), rows, cols,
                                                          int(axis), amax, fmax, inv_fmax, vec, q,
                                                          qt, inv);
    else
      cast_kernel<T, false><<<grid, kThreads, 0, stream>>>(static_cast<const T*>(x), rows, cols,
                                                           int(axis), amax, fmax, inv_fmax, vec, q,
                                                           qt, inv);
  });
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace cs
