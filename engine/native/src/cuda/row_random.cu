// row_random.cu: RowRandom's draws (row_random.h) in one pass, the "rand"
// kernel (kernels.h): a thread computes one element of a row (a pair of
// elements, j and half + j, for the normal draw) from row_bits.h's scalar code
// and writes it; nothing is read. Rows go over gridDim.y (looped past 65,535).
#include "common.cuh"
#include "row_bits.h"

namespace cs {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr unsigned kMaxRowsGrid = 65535;

template <kern::RowKind K>
__global__ void __launch_bounds__(kThreads) row_random_kernel(const kern::RowDraw d, void* out) {
  const int64_t per_row = d.per_row;
  const int64_t half = (per_row + 1) / 2;
  const int64_t cols = K == kern::RowKind::Normal ? half : per_row;
  const int64_t j = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (j >= cols) return;
  for (int64_t r = blockIdx.y; r < d.rows; r += gridDim.y) {
    const uint32_t rk = kern::row_key(d.key, d.row0 + r);
    const int64_t at = r * per_row + j;
    if (K == kern::RowKind::Normal) {
      float c, s;
      kern::row_normal(kern::row_bits(rk, j), kern::row_bits(rk, half + j), c, s);
      float* o = static_cast<float*>(out);
      o[at] = c;
      if (half + j < per_row) o[at + half] = s;
    } else if (K == kern::RowKind::Uniform) {
      static_cast<float*>(out)[at] = kern::row_uniform(kern::row_bits(rk, j));
    } else if (K == kern::RowKind::Randint) {
      static_cast<int64_t*>(out)[at] = int64_t(kern::row_bits(rk, j) % uint32_t(d.span)) + d.lo;
    } else {
      static_cast<int64_t*>(out)[at] = int64_t(kern::row_bits(rk, j));
    }
  }
}

}  // namespace

cudaError_t row_random(const kern::RowDraw& d, void* out, cudaStream_t stream) {
  if (d.rows < 0 || d.per_row < 0 || (d.kind == kern::RowKind::Randint && (d.span <= 0 || d.span > (int64_t(1) << 31))))
    return cudaErrorInvalidValue;
  const int64_t cols = d.kind == kern::RowKind::Normal ? (d.per_row + 1) / 2 : d.per_row;
  if (d.rows == 0 || cols == 0) return cudaSuccess;
  const dim3 grid(unsigned((cols + kThreads - 1) / kThreads),
                  unsigned(d.rows < int64_t(kMaxRowsGrid) ? d.rows : int64_t(kMaxRowsGrid)));
  using K = kern::RowKind;
  auto launch = [&](auto kernel) { kernel<<<grid, kThreads, 0, stream>>>(d, out); };
  if (d.kind == K::Bits) launch(row_random_kernel<K::Bits>);
  if (d.kind == K::Uniform) launch(row_random_kernel<K::Uniform>);
  if (d.kind == K::Randint) launch(row_random_kernel<K::Randint>);
  if (d.kind == K::Normal) launch(row_random_kernel<K::Normal>);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace cs
