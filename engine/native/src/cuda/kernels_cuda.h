// kernels_cuda.h: launchers of the engine's CUDA kernels (cuda/*.cu), on raw
// device pointers, so that the .cu files need no torch headers. The C++ glue
// (linear_ce.cpp, add_layer_norm.cpp, bn_relu.cpp, max_pool.cpp,
// stem_conv.cpp, linear_act.cpp, linear_casts.cpp, optim.cpp, fp8_linear.cpp,
// row_random.cpp) checks shapes, dtypes, contiguity and alignment and passes
// the current stream. Every launcher returns the launch's cudaError_t
// (cudaSuccess when all went well). host_kernels.h has the same computations
// as host loops, for the tests.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "dtype.h"

namespace cs {
namespace cuda {

// Element types the kernels read and write.
using kern::DType;

// ---- cross_entropy.cu --------------------------------------------------------
// In place over logits [rows, ld] (dtype t; columns [V, ld) are padding): per
// row, loss[row] = logsumexp(z[0:V]) - z[target] in fp32, then the row is
// overwritten with softmax(z) - onehot(target) over [0, V) and 0 over [V, ld).
// target values must lie in [0, V).
cudaError_t cross_entropy_fwd_grad(void* logits, DType t, int64_t rows, int64_t ld, int64_t V,
                                   const int64_t* target, float* loss, cudaStream_t stream);

// ---- layer_norm.cu -------------------------------------------------------------
// Forward, per row of C values: r = x + delta rounded to tr (delta null: r =
// x), mean and rstd of r in fp32, y = (r - mean) * rstd * w + b. r is stored
// in r_out where delta and r_out are given, with r_sparse ("lny") only in the
// columns kern::ln_keeps_r(w, b) picks (ln_keep.h; the backward reads y in
// the others). x, r_out: dtype tr; delta: td; y: to; w, b, mean, rstd: fp32.
cudaError_t layer_norm_fwd(const void* x, const void* delta, const float* w, const float* b,
                           void* r_out, void* y, float* mean, float* rstd, DType tr, DType td,
                           DType to, int64_t rows, int64_t C, float eps, bool r_sparse,
                           cudaStream_t stream);

// Scratch floats layer_norm_bwd needs for rows x C (the columns' partial sums).
int64_t layer_norm_bwd_scratch(int64_t rows, int64_t C);

// Backward (operands: LnBwd): dx = dr + d LayerNorm(r)/dr . dy (dr null: 0)
// in dtype tr, with x^ from r as stored, or where y is given from y, w and b
// but in the columns ln_keeps_r picks (r as a sparse forward stored it);
// ddelta (null: not written) the same values in dtype td; dw, db (fp32, C)
// the weight and bias gradients and dsum (null: none; fp32, C) the column
// sums of the delta's gradient as stored (overwritten, not accumulated). dy2
// (null: none) is a second gradient of y (dtype to), added to dy as it is
// read, the sum rounded to to as a separate add would. scratch: at least
// layer_norm_bwd_scratch(rows, C) floats. Deterministic (no atomics).
using kern::LnBwd;
cudaError_t layer_norm_bwd(const LnBwd& a, DType tr, DType td, DType to, int64_t rows, int64_t C,
                           cudaStream_t stream);

// Whether the LayerNorm kernels take rows of C values, and these dtypes:
// output (to) bf16 or fp16; residual (tr) fp32 or the output's; delta (td)
// the residual's or the output's.
bool layer_norm_supports(int64_t C);
bool layer_norm_dtypes(DType tr, DType td, DType to);

// ---- bn_relu.cu ------------------------------------------------------------------
// Training-mode batch norm over x [M = N H W, C] (channels_last, dtype t bf16
// or fp16), then + residual (null: none), then ReLU (relu) into y (dtype t).
// Statistics in fp32: save_mean and save_invstd (C) for the backward pass;
// running_mean / running_var (fp32, C; null: not kept) updated with momentum
// (the variance unbiased). mask (M C / 8 bytes): bit k of byte i is whether
// element 8 i + k passed the ReLU. w, b: fp32 (C). scratch: at least
// bn_act_fwd_scratch(M, C) floats. Pointers of activations 16-byte aligned,
// of fp32 vectors 32-byte aligned.
bool bn_act_supports(int64_t C);  // C a multiple of 8, at most 2048
int64_t bn_act_fwd_scratch(int64_t M, int64_t C);
int64_t bn_act_bwd_scratch(int64_t M, int64_t C);
cudaError_t bn_act_fwd(const void* x, const void* residual, const float* w, const float* b,
                       float* running_mean, float* running_var, void* y, uint8_t* mask,
                       float* save_mean, float* save_invstd, float* scratch, DType t, int64_t M,
                       int64_t C, float eps, float momentum, bool relu, cudaStream_t stream);
// Backward from dy (dtype t): dx, the residual's gradient dresidual (null: not
// written; the ReLU's masked dy), dw and db (fp32, overwritten). dy2 (null:
// none) is a second gradient of the output, added to dy (the sum rounded to t,
// as a separate add would) as it is read; it needs dresidual, where the masked
// sum is kept for the second pass.
cudaError_t bn_act_bwd(const void* dy, const void* dy2, const uint8_t* mask, const void* x, const float* w,
                       const float* save_mean, const float* save_invstd, void* dx, void* dresidual,
                       float* dw, float* db, float* scratch, DType t, int64_t M, int64_t C, bool relu,
                       cudaStream_t stream);

// bn_act_bwd with relu and neither a residual nor dy2, where no mask was
// kept: the ReLU's mask recomputed from x and relu_coef [2][C] (scale,
// shift; fp32, 32-byte aligned), the forward's apply coefficients: the bits
// bn_act_apply(x, null, relu_coef, ...) writes, so the same results as that
// mask given to bn_act_bwd, without the apply pass (resnet_fusion.cpp's bn2).
cudaError_t bn_act_bwd_remask(const void* dy, const void* x, const float* relu_coef, const float* w,
                              const float* save_mean, const float* save_invstd, void* dx, float* dw, float* db,
                              float* scratch, DType t, int64_t M, int64_t C, cudaStream_t stream);

// The same batch norm's passes apart, for statistics that come as sums (a
// fused convolution's GenStats, resnet_fusion.h): bn_sums_finalize turns
// sum, sqsum (fp32, C, over M rows) into save_mean, save_invstd, the running
// statistics (as bn_act_fwd) and coef [2][C] (scale, shift; fp32, 32-byte
// aligned), and where coef16 is not null the same as fp16 [2][C];
// bn_act_apply writes y = relu?(x scale + shift (+ residual)) and the mask
// as bn_act_fwd does.
cudaError_t bn_sums_finalize(const float* sum, const float* sqsum, const float* w, const float* b,
                             float* running_mean, float* running_var, float* save_mean,
                             float* save_invstd, float* coef, void* coef16, int64_t M, int64_t C,
                             float eps, float momentum, cudaStream_t stream);
cudaError_t bn_act_apply(const void* x, const void* residual, const float* coef, void* y,
                         uint8_t* mask, DType t, int64_t M, int64_t C, bool relu, cudaStream_t stream);

// ---- max_pool.cu -----------------------------------------------------------------
// Max pooling (window k, stride s, padding p, no dilation, floor mode) over x
// [N, H, W, C] (channels_last, bf16 or fp16) into y [N, Ho, Wo, C]; arg (one
// byte per output element) is the maximum's place kh k + kw in its window.
// The backward pass writes every element of dx [N, H, W, C].
bool max_pool_supports(int64_t C, int64_t k, int64_t s, int64_t p);
cudaError_t max_pool_fwd(const void* x, void* y, uint8_t* arg, DType t, int64_t N, int64_t H,
                         int64_t W, int64_t C, int64_t Ho, int64_t Wo, int64_t k, int64_t s,
                         int64_t p, cudaStream_t stream);
cudaError_t max_pool_bwd(const void* dy, const uint8_t* arg, void* dx, DType t, int64_t N,
                         int64_t H, int64_t W, int64_t C, int64_t Ho, int64_t Wo, int64_t k,
                         int64_t s, int64_t p, cudaStream_t stream);

// ---- stem_rows.cu ----------------------------------------------------------------
// The rows of stem_conv's matrix product: rows [N Ho Wo, K = k kw C] (dtype t,
// row-major) from the image x [N, H, W, C] (channels_last, dtype tx): row
// (n, ho, wo), column (kh kw + dw) C + c holds x[n, ho s - p + kh, wo s - p +
// dw, c] rounded to t, 0 outside the image (kw >= k: the widened window's
// columns are read as well). Needs K a multiple of 8, at most 2048.
bool stem_rows_supports(int64_t K);
cudaError_t stem_rows(const void* x, void* rows, DType tx, DType t, int64_t N, int64_t H, int64_t W,
                      int64_t C, int64_t Ho, int64_t Wo, int64_t k, int64_t kw, int64_t s,
                      int64_t p, cudaStream_t stream);

// ---- bias_act.cu ------------------------------------------------------------------
// The backward of y = act(z), z = x W^T + b, over rows of C (dtype t): dz =
// dy act'(z) into dz_out (act None: dz is dy itself; z and dz_out unused), and
// db[c] = the sum over rows of dz[row][c] as stored, in fp32 (overwritten).
// scratch: at least bias_act_bwd_scratch(rows, C) floats. Deterministic (no
// atomics: per-block partial sums, then a fixed-order sum over blocks).
using kern::Act;
int64_t bias_act_bwd_scratch(int64_t rows, int64_t C);
cudaError_t bias_act_bwd(const void* dy, const void* z, void* dz_out, float* db, float* scratch,
                         DType t, Act act, int64_t rows, int64_t C, cudaStream_t stream);
// The qkv projection's backward: its output gradient dz [B T, 3 H D] (dtype t)
// gathered from the q, k and v gradients (HeadsGrad), and db = dz's column
// sums in fp32, in one pass; scratch as for bias_act_bwd(B T, 3 H D).
using kern::HeadsGrad;
cudaError_t qkv_bwd(const HeadsGrad& g, void* dz, float* db, float* scratch, DType t,
                    cudaStream_t stream);

// ---- cast.cu ---------------------------------------------------------------------
// dst[i] = src[i] rounded to dtype to (bf16 or fp16) for i < n, for every job,
// in one launch per 64 jobs.
using kern::CastJob;
cudaError_t cast_f32_many(const CastJob* jobs, int count, DType to, cudaStream_t stream);

// ---- fp8_cast.cu -----------------------------------------------------------------
// precision fp8's operand quantization (fp8_linear.cpp): x [rows, cols]
// (dtype t, row-major, contiguous).
enum class Fp8Axis { Tensor = 0, Rows = 1, Cols = 2 };
enum class Fp8Format { E4M3 = 0, E5M2 = 1 };
// amax = max |x| over all of x (1 float), each row (rows floats) or each
// column (cols floats), exact; a NaN in x gives NaN.
cudaError_t fp8_amax(const void* x, DType t, int64_t rows, int64_t cols, Fp8Axis axis, float* amax,
                     cudaStream_t stream);
// With a = max(amax, 1e-12) for the element's tensor, row or column (as
// fp8_amax wrote it) and scale = fmax / a (448 e4m3, 57344 e5m2, rounded as
// RN(RN(1 / a) * fmax)): q [rows, cols] (null: not written) and its transpose
// qt [cols, rows] (null: not written) = x * scale rounded to the format (ties
// to even), from one read of x; inv (null: not written; as many floats as
// amax) = a / fmax, the dequantization scale _scaled_mm takes.
cudaError_t fp8_cast(const void* x, DType t, int64_t rows, int64_t cols, Fp8Axis axis,
                     const float* amax, Fp8Format f, uint8_t* q, uint8_t* qt, float* inv,
                     cudaStream_t stream);

// ---- adamw.cu --------------------------------------------------------------------
// One AdamW step (PyTorch 2.11's ADAMW arithmetic: at::_fused_adamw_'s bits) of every
// job, in one launch per 64 jobs: the gradient divided by *grad_scale (null:
// not), then the decoupled decay, the moments and the parameter update with
// the bias corrections of the step count *step (this step included). Nothing
// changes where found_inf (null: never) holds a nonzero value. The gradients
// are only read. Every scalar stays on the device (graph-capturable). A job's
// copy (kernels.h "adamc") gets the updated parameter in bf16 or fp16.
using kern::AdamwHyper;
using kern::AdamwJob;
cudaError_t adamw_many(const AdamwJob* jobs, int count, const AdamwHyper& h, const float* step,
                       const float* grad_scale, const float* found_inf, cudaStream_t stream);

// ---- row_random.cu ---------------------------------------------------------------
// RowRandom's draw d (row_random.h) into out [d.rows, d.per_row] (contiguous;
// int64 for Bits and Randint, float for Uniform and Normal), every value as
// row_bits.h computes it: the tensor ops' values bit for bit (the normal's
// through logf, sqrtf, cosf and sinf: libdevice's). Errors: a negative size,
// a Randint span outside (0, 2^31].
using kern::RowDraw;
using kern::RowKind;
cudaError_t row_random(const RowDraw& d, void* out, cudaStream_t stream);

// ---- interfere.cu ----------------------------------------------------------------
// The κ calibration's load (interfere.cpp): blocks blocks copy src to dst
// (bytes, 16-byte aligned, each block its own slice) round after round until
// *stop (device memory) reaches epoch, paced to gbps GB/s read + written in all
// (0: unpaced); *copied gains the bytes read and written. Launch it on a side
// stream: it runs until something else sets *stop, or max_ns have passed (each
// block that stops so adds 1 to *timeouts).
cudaError_t interfere_copy(const void* src, void* dst, int64_t bytes, int blocks, double gbps,
                           const int* stop, int epoch, unsigned long long* copied, uint64_t max_ns,
                           unsigned long long* timeouts, cudaStream_t stream);

}  // namespace cuda
}  // namespace cs
