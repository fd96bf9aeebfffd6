// dtype.h: the element types the engine's kernels read and write, shared by
// the CUDA launchers (kernels_cuda.h) and their host versions (host_kernels.h);
// no CUDA headers here.
#pragma once

#include <cstdint>

namespace cs {
namespace kern {

enum class DType { F32 = 0, BF16 = 1, F16 = 2 };

// The activation after a linear layer whose backward the "lin" kernel fuses:
// none, GELU with the tanh approximation (GPT-2), exact GELU with erf (BERT).
enum class Act { None = 0, GeluTanh = 1, GeluErf = 2 };

// One tensor of the "cast" kernel: n fp32 values at src to write at dst in
// the kernel's target dtype.
struct CastJob {
  const float* src;
  void* dst;
  int64_t n;
};

// The q, k and v gradients of a transformer's qkv projection for the "qkv"
// kernel: each [B, H, T, D], element (b, h, t, j) at src[s] + b stride[s][0] +
// h stride[s][1] + t stride[s][2] + j, gathered into the projection's output
// gradient [B T, 3 H D] (row b T + t, column s H D + h D + j).
struct HeadsGrad {
  const void* src[3];
  int64_t stride[3][3];
  int64_t B, H, T, D;
};

// Whether g is one the kernels take: sources given, sizes positive (B T may be
// 0), rows and columns within 32 bits.
inline bool heads_grad_valid(const HeadsGrad& g) {
  if (!g.src[0] || !g.src[1] || !g.src[2] || g.B < 0 || g.T < 0 || g.H < 1 || g.D < 1) return false;
  const int64_t lim = int64_t(1) << 31;
  return g.T < lim && g.B <= lim / (g.T > 0 ? g.T : 1) && g.H < lim && g.D <= lim / (3 * g.H);
}

// The LayerNorm backward's operands (layer_norm_bwd; dtypes tr, td, to as
// there): the output gradient dy and a second one dy2 (null: none), the
// residual's own gradient dr (null: none); x^ = (r - mean) rstd from the sum r
// as stored (r and mean always given), or, where y is given ("lny"), x^ =
// (y - b) / w from the output y but in the columns ln_keeps_r (ln_keep.h)
// picks, the only ones whose r the forward stored; dx, ddelta (null: not written); dw, db; dsum (null: not kept) the
// column sums of the delta's gradient as stored (fp32: the bias gradient of
// the linear layer that made delta); scratch for the partial sums.
struct LnBwd {
  const void* dy = nullptr;
  const void* dy2 = nullptr;
  const void* dr = nullptr;
  const void* r = nullptr;
  const void* y = nullptr;
  const float* mean = nullptr;
  const float* rstd = nullptr;
  const float* w = nullptr;
  const float* b = nullptr;
  void* dx = nullptr;
  void* ddelta = nullptr;
  float* dw = nullptr;
  float* db = nullptr;
  float* dsum = nullptr;
  float* scratch = nullptr;
};

// One tensor of the "adam" kernel: n fp32 values of a parameter, its gradient
// and its two AdamW moments, all laid out alike; weight_decay is its group's.
// copy (null: none; the "adamc" switch, linear_casts.h): n values of copy_dt
// (BF16 or F16) laid out as the parameter, where the kernel writes the
// updated parameter rounded to nearest even, the bits of its cast.
struct AdamwJob {
  float* param;
  const float* grad;
  float* exp_avg;
  float* exp_avg_sq;
  int64_t n;
  double weight_decay;
  void* copy = nullptr;
  DType copy_dt = DType::BF16;
};

// The AdamW hyper-parameters every tensor of an "adam" launch shares.
struct AdamwHyper {
  double lr, beta1, beta2, eps;
};

// The "rand" kernel (RowRandom, row_random.h): what a RowDraw writes: int64
// bits in [0, 2^32), float uniform in [0, 1), int64 randint in [lo, lo +
// span), float normal (Box-Muller).
enum class RowKind { Bits = 0, Uniform = 1, Randint = 2, Normal = 3 };

// One [rows, per_row] draw: key is RowRandom's key of (seed, stream, step),
// rows are global rows row0 ... row0 + rows - 1.
struct RowDraw {
  RowKind kind;
  uint32_t key;
  int64_t row0, rows, per_row;
  int64_t lo, span;  // Randint: 0 < span <= 2^31
};

}  // namespace kern
}  // namespace cs
