// host_kernels.h: the engine's CUDA kernels (cuda/kernels_cuda.h) as plain
// loops on the host, over the same raw pointers, layouts and dtypes, with the
// same roundings to the stored dtypes (sums in double, so not the kernels'
// summation order). They are for the tests: under kernels::set_host_for_tests
// the autograd functions around the kernels run on CPU tensors through these,
// so that the CPU build exercises the C++ side of each kernel (the arguments
// of Function::apply, what is saved, which gradient goes where in which
// dtype) as the GPU runs it. The engine itself never calls them: its CPU path
// is the portable libtorch one. Each function throws std::invalid_argument
// where its CUDA launcher returns an error; the facts (supports, scratch
// sizes) answer as the CUDA ones do, so that the glue takes the same branches.
#pragma once

#include <cstdint>

#include "cuda/dtype.h"

namespace cs {
namespace host {

using kern::Act;
using kern::DType;
using kern::LnBwd;

void cross_entropy_fwd_grad(void* logits, DType t, int64_t rows, int64_t ld, int64_t V,
                            const int64_t* target, float* loss);

bool layer_norm_supports(int64_t C);
bool layer_norm_dtypes(DType tr, DType td, DType to);
int64_t layer_norm_bwd_scratch(int64_t rows, int64_t C);
void layer_norm_fwd(const void* x, const void* delta, const float* w, const float* b, void* r_out,
                    void* y, float* mean, float* rstd, DType tr, DType td, DType to, int64_t rows,
                    int64_t C, float eps, bool r_sparse);
void layer_norm_bwd(const LnBwd& a, DType tr, DType td, DType to, int64_t rows, int64_t C);

bool bn_act_supports(int64_t C);
int64_t bn_act_fwd_scratch(int64_t M, int64_t C);
int64_t bn_act_bwd_scratch(int64_t M, int64_t C);
void bn_act_fwd(const void* x, const void* residual, const float* w, const float* b,
                float* running_mean, float* running_var, void* y, uint8_t* mask, float* save_mean,
                float* save_invstd, float* scratch, DType t, int64_t M, int64_t C, float eps,
                float momentum, bool relu);
void bn_act_bwd(const void* dy, const void* dy2, const uint8_t* mask, const void* x, const float* w,
                const float* save_mean, const float* save_invstd, void* dx, void* dresidual,
                float* dw, float* db, float* scratch, DType t, int64_t M, int64_t C, bool relu);

bool max_pool_supports(int64_t C, int64_t k, int64_t s, int64_t p);
void max_pool_fwd(const void* x, void* y, uint8_t* arg, DType t, int64_t N, int64_t H, int64_t W,
                  int64_t C, int64_t Ho, int64_t Wo, int64_t k, int64_t s, int64_t p);
void max_pool_bwd(const void* dy, const uint8_t* arg, void* dx, DType t, int64_t N, int64_t H,
                  int64_t W, int64_t C, int64_t Ho, int64_t Wo, int64_t k, int64_t s, int64_t p);

bool stem_rows_supports(int64_t K);
void stem_rows(const void* x, void* rows, DType tx, DType t, int64_t N, int64_t H, int64_t W,
               int64_t C, int64_t Ho, int64_t Wo, int64_t k, int64_t kw, int64_t s, int64_t p);

void cast_f32_many(const kern::CastJob* jobs, int count, DType to);

// step, grad_scale and found_inf point at CPU floats here.
void adamw_many(const kern::AdamwJob* jobs, int count, const kern::AdamwHyper& h, const float* step,
                const float* grad_scale, const float* found_inf);

int64_t bias_act_bwd_scratch(int64_t rows, int64_t C);
void bias_act_bwd(const void* dy, const void* z, void* dz_out, float* db, float* scratch, DType t,
                  Act act, int64_t rows, int64_t C);
void qkv_bwd(const kern::HeadsGrad& g, void* dz, float* db, float* scratch, DType t);

// The "rand" kernel's loop (cuda/row_bits.h's element code; the normal's
// logf, sqrtf, cosf and sinf are the C library's here, not libdevice's).
void row_random(const kern::RowDraw& d, void* out);

}  // namespace host
}  // namespace cs
