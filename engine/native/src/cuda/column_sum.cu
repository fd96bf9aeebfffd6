// column_sum.cu: the second pass of the kernels that reduce over rows in two
// (LayerNorm's weight and bias gradients and the delta's column sums, the
// linear layers' bias gradient):
// the per-block partial sums part [rows][cols] summed down each column. 32
// columns per block; kRows threads go down the rows, each in row order, then
// their sums are added in thread order: deterministic, no atomics.
#include "common.cuh"

namespace cs {
namespace cuda {
namespace {

constexpr int kRows = 16;

__global__ void __launch_bounds__(32 * kRows)
    column_sum_kernel(const float* __restrict__ part, int64_t rows, int64_t cols, int64_t split,
                      float* __restrict__ out, float* __restrict__ out2, int64_t split2,
                      float* __restrict__ out3) {
  __shared__ float sm[kRows][33];
  const int64_t i = int64_t(blockIdx.x) * 32 + threadIdx.x;
  float s = 0.f;
  if (i < cols) {
#pragma unroll 4
    for (int64_t k = threadIdx.y; k < rows; k += kRows) s += part[k * cols + i];
  }
  sm[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y != 0 || i >= cols) return;
  s = 0.f;
#pragma unroll
  for (int k = 0; k < kRows; k++) s += sm[k][threadIdx.x];
  if (i < split)
    out[i] = s;
  else if (i < split2)
    out2[i - split] = s;
  else
    out3[i - split2] = s;
}

}  // namespace

cudaError_t column_sum3(const float* part, int64_t rows, int64_t cols, float* out, int64_t split,
                        float* out2, int64_t split2, float* out3, cudaStream_t stream) {
  if (cols <= 0) return cudaSuccess;
  column_sum_kernel<<<unsigned((cols + 31) / 32), dim3(32, kRows), 0, stream>>>(
      part, rows, cols, split, out, out2, split2, out3);
  return cudaGetLastError();
}

cudaError_t column_sum(const float* part, int64_t rows, int64_t cols, float* out, int64_t split,
                       float* out2, cudaStream_t stream) {
  return column_sum3(part, rows, cols, out, split, out2, cols, nullptr, stream);
}

}  // namespace cuda
}  // namespace cs
