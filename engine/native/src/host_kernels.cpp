// host_kernels.cpp: see host_kernels.h. Each function follows its .cu
// counterpart's definition (the comments in cuda/kernels_cuda.h), element by
// element, single-threaded.
#include "host_kernels.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/gelu.h"
#include "cuda/ln_keep.h"
#include "cuda/row_bits.h"

namespace cs {
namespace host {
namespace {

template <typename T>
float f(T v) {
  return static_cast<float>(v);
}
// Round to T (to nearest even, as the kernels' stores and PyTorch's casts).
template <typename T>
T to(float v) {
  return T(v);
}

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument("host kernel " + what);
}

}  // namespace

// CS_HOST_DISPATCH(dt, T, ...): the statement with T the element type of dt.
#define CS_HOST_DISPATCH(dt, T, ...)   \
  switch (dt) {                        \
    case DType::F32: {                 \
      using T = float;                 \
      __VA_ARGS__;                     \
      break;                           \
    }                                  \
    case DType::BF16: {                \
      using T = c10::BFloat16;         \
      __VA_ARGS__;                     \
      break;                           \
    }                                  \
    case DType::F16: {                 \
      using T = c10::Half;             \
      __VA_ARGS__;                     \
      break;                           \
    }                                  \
    default:                           \
      bad("dtype");                    \
  }

// ---- cross entropy -------------------------------------------------------------

namespace {
template <typename T>
void ce(T* logits, int64_t rows, int64_t ld, int64_t V, const int64_t* target, float* loss) {
  for (int64_t row = 0; row < rows; row++) {
    T* z = logits + row * ld;
    float m = -std::numeric_limits<float>::infinity();
    bool nan = false;
    for (int64_t c = 0; c < V; c++) {
      m = std::max(m, f(z[c]));
      nan |= std::isnan(f(z[c]));
    }
    double s = 0;
    for (int64_t c = 0; c < V; c++) s += std::exp(double(f(z[c])) - m);
    const float lse = nan ? std::numeric_limits<float>::quiet_NaN() : m + float(std::log(s));
    const int64_t t = target[row];
    loss[row] = lse - f(z[t]);
    for (int64_t c = 0; c < ld; c++) {
      float g = c < V ? std::exp(f(z[c]) - lse) : 0.f;
      if (c == t) g -= 1.f;
      z[c] = to<T>(g);
    }
  }
}
}  // namespace

void cross_entropy_fwd_grad(void* logits, DType t, int64_t rows, int64_t ld, int64_t V,
                            const int64_t* target, float* loss) {
  if (rows < 0 || V < 1 || ld < V) bad("cross_entropy: shape");
  CS_HOST_DISPATCH(t, T, ce(static_cast<T*>(logits), rows, ld, V, target, loss));
}

// ---- layer norm ----------------------------------------------------------------

bool layer_norm_supports(int64_t C) { return C >= 1; }

bool layer_norm_dtypes(DType tr, DType td, DType to) {
  return (to == DType::BF16 || to == DType::F16) &&
         ((tr == DType::F32 && (td == DType::F32 || td == to)) || (tr == to && td == to));
}

int64_t layer_norm_bwd_scratch(int64_t, int64_t) { return 1; }

namespace {
template <typename TR, typename TD, typename TO>
void ln_fwd(const TR* x, const TD* delta, const float* w, const float* b, TR* r_out, TO* y,
            float* mean_out, float* rstd_out, int64_t rows, int64_t C, float eps, bool sparse) {
  std::vector<float> v(static_cast<size_t>(C));
  for (int64_t row = 0; row < rows; row++) {
    const int64_t off = row * C;
    double sum = 0;
    for (int64_t c = 0; c < C; c++) {
      float r = f(x[off + c]);
      if (delta) {
        r = f(to<TR>(r + f(delta[off + c])));  // r as stored (in r_out, where given)
        if (r_out && (!sparse || kern::ln_keeps_r(w[c], b[c]))) r_out[off + c] = to<TR>(r);
      }
      v[size_t(c)] = r;
      sum += r;
    }
    const float mean = float(sum / double(C));
    double sq = 0;
    for (int64_t c = 0; c < C; c++) sq += double(v[size_t(c)] - mean) * double(v[size_t(c)] - mean);
    const float rstd = 1.f / std::sqrt(float(sq / double(C)) + eps);
    for (int64_t c = 0; c < C; c++) y[off + c] = to<TO>((v[size_t(c)] - mean) * rstd * w[c] + b[c]);
    mean_out[row] = mean;
    rstd_out[row] = rstd;
  }
}

template <typename TR, typename TD, typename TO>
void ln_bwd(const LnBwd& a, int64_t rows, int64_t C) {
  const auto* dy = static_cast<const TO*>(a.dy);
  const auto* dy2 = static_cast<const TO*>(a.dy2);
  const auto* dr = static_cast<const TR*>(a.dr);
  const auto* r = static_cast<const TR*>(a.r);
  const auto* y = static_cast<const TO*>(a.y);
  auto* dx = static_cast<TR*>(a.dx);
  auto* ddelta = static_cast<TD*>(a.ddelta);
  const float* w = a.w;
  // dy, plus dy2 where given, rounded to TO as a separate add rounds it.
  auto grad = [&](int64_t i) { return dy2 ? f(to<TO>(f(dy[i]) + f(dy2[i]))) : f(dy[i]); };
  // x^ from r as stored, or from y, w and b where y is given, but in the
  // columns ln_keeps_r picks (r stored there).
  auto xhat = [&](int64_t row, int64_t c) {
    const int64_t i = row * C + c;
    if (y && !kern::ln_keeps_r(w[c], a.b[c])) return (f(y[i]) - a.b[c]) / w[c];
    return (f(r[i]) - a.mean[row]) * a.rstd[row];
  };
  std::vector<double> sdw(static_cast<size_t>(C), 0.0), sdb(static_cast<size_t>(C), 0.0),
      sds(static_cast<size_t>(C), 0.0);
  for (int64_t row = 0; row < rows; row++) {
    const int64_t off = row * C;
    const float rs = a.rstd[row];
    double sg = 0, sgx = 0;
    for (int64_t c = 0; c < C; c++) {
      const float xh = xhat(row, c), g = grad(off + c);
      sdw[size_t(c)] += double(g) * xh;
      sdb[size_t(c)] += g;
      sg += double(g) * w[c];
      sgx += double(g) * w[c] * xh;
    }
    const float mg = float(sg / double(C)), mgx = float(sgx / double(C));
    for (int64_t c = 0; c < C; c++) {
      const float xh = xhat(row, c);
      const float d = (dr ? f(dr[off + c]) : 0.f) + rs * (grad(off + c) * w[c] - mg - xh * mgx);
      dx[off + c] = to<TR>(d);
      if (ddelta) ddelta[off + c] = to<TD>(d);
      sds[size_t(c)] += ddelta ? f(ddelta[off + c]) : f(dx[off + c]);  // as stored
    }
  }
  for (int64_t c = 0; c < C; c++) {
    a.dw[c] = float(sdw[size_t(c)]);
    a.db[c] = float(sdb[size_t(c)]);
    if (a.dsum) a.dsum[c] = float(sds[size_t(c)]);
  }
}
}  // namespace

void layer_norm_fwd(const void* x, const void* delta, const float* w, const float* b, void* r_out,
                    void* y, float* mean, float* rstd, DType tr, DType td, DType to, int64_t rows,
                    int64_t C, float eps, bool r_sparse) {
  if (rows < 0 || !layer_norm_supports(C)) bad("layer_norm_fwd: arguments");
  if (!delta) td = tr;  // unused
  if (!layer_norm_dtypes(tr, td, to)) bad("layer_norm_fwd: dtypes");
  CS_HOST_DISPATCH(tr, TR, CS_HOST_DISPATCH(td, TD, CS_HOST_DISPATCH(to, TO, ln_fwd<TR, TD, TO>(
      static_cast<const TR*>(x), static_cast<const TD*>(delta), w, b, static_cast<TR*>(r_out),
      static_cast<TO*>(y), mean, rstd, rows, C, eps, r_sparse))));
}

void layer_norm_bwd(const LnBwd& a, DType tr, DType td, DType to, int64_t rows, int64_t C) {
  if (rows < 0 || !layer_norm_supports(C) || !a.dy || !a.rstd || !a.w || !a.dx || !a.dw || !a.db ||
      !a.r || !a.mean || (a.y && !a.b))
    bad("layer_norm_bwd: arguments");
  if (!a.ddelta) td = tr;  // unused
  if (!layer_norm_dtypes(tr, td, to)) bad("layer_norm_bwd: dtypes");
  CS_HOST_DISPATCH(tr, TR, CS_HOST_DISPATCH(td, TD, CS_HOST_DISPATCH(to, TO, ln_bwd<TR, TD, TO>(
      a, rows, C))));
}

// ---- batch norm + add + ReLU -----------------------------------------------------

bool bn_act_supports(int64_t C) { return C >= 8 && C % 8 == 0 && C / 8 <= 256; }
int64_t bn_act_fwd_scratch(int64_t, int64_t) { return 1; }
int64_t bn_act_bwd_scratch(int64_t, int64_t) { return 1; }

namespace {
template <typename T>
void bn_fwd(const T* x, const T* res, const float* w, const float* b, float* rm, float* rv, T* y,
            uint8_t* mask, float* save_mean, float* save_invstd, int64_t M, int64_t C, float eps,
            float momentum, bool relu) {
  std::vector<float> scale(static_cast<size_t>(C)), shift(static_cast<size_t>(C));
  for (int64_t c = 0; c < C; c++) {
    double sum = 0;
    for (int64_t r = 0; r < M; r++) sum += f(x[r * C + c]);
    const double mean = sum / double(M);
    double m2 = 0;
    for (int64_t r = 0; r < M; r++) m2 += (f(x[r * C + c]) - mean) * (f(x[r * C + c]) - mean);
    const float var = float(m2 / double(M)), invstd = 1.f / std::sqrt(var + eps);
    save_mean[c] = float(mean);
    save_invstd[c] = invstd;
    if (rm) rm[c] = (1.f - momentum) * rm[c] + momentum * float(mean);
    if (rv) rv[c] = (1.f - momentum) * rv[c] + momentum * (M > 1 ? float(m2 / double(M - 1)) : var);
    scale[size_t(c)] = w[c] * invstd;
    shift[size_t(c)] = b[c] - float(mean) * scale[size_t(c)];
  }
  for (int64_t i = 0; i < M * C; i++) {
    const int64_t c = i % C;
    float v = f(x[i]) * scale[size_t(c)] + shift[size_t(c)];
    if (res) v += f(res[i]);
    if (relu) {
      const bool keep = !(v <= 0.f);  // NaN stays NaN, as torch's relu
      if (i % 8 == 0) mask[i / 8] = 0;
      mask[i / 8] |= uint8_t(unsigned(keep) << (i % 8));
      v = keep ? v : 0.f;
    }
    y[i] = to<T>(v);
  }
}

template <typename T>
void bn_bwd(const T* dy, const T* dy2, const uint8_t* mask, const T* x, const float* w,
            const float* save_mean, const float* save_invstd, T* dx, T* dres, float* dw, float* db,
            int64_t M, int64_t C, bool relu) {
  // dy, plus dy2 rounded as a separate add would round it.
  auto d = [&](int64_t i) { return dy2 ? f(to<T>(f(dy[i]) + f(dy2[i]))) : f(dy[i]); };
  auto g = [&](int64_t i) { return relu && !((mask[i / 8] >> (i % 8)) & 1u) ? 0.f : d(i); };
  std::vector<double> a(static_cast<size_t>(C), 0.0), bb(static_cast<size_t>(C), 0.0);
  for (int64_t i = 0; i < M * C; i++) {
    const int64_t c = i % C;
    if (dres) dres[i] = to<T>(g(i));
    a[size_t(c)] += g(i);
    bb[size_t(c)] += double(g(i)) * (f(x[i]) - save_mean[c]) * save_invstd[c];
  }
  std::vector<float> k1(static_cast<size_t>(C)), kb(static_cast<size_t>(C)), kx(static_cast<size_t>(C));
  for (int64_t c = 0; c < C; c++) {
    db[c] = float(a[size_t(c)]);
    dw[c] = float(bb[size_t(c)]);
    k1[size_t(c)] = w[c] * save_invstd[c];
    kb[size_t(c)] = k1[size_t(c)] * db[c] / float(M);
    kx[size_t(c)] = k1[size_t(c)] * save_invstd[c] * dw[c] / float(M);
  }
  for (int64_t i = 0; i < M * C; i++) {
    const size_t c = size_t(i % C);
    dx[i] = to<T>(k1[c] * g(i) - kb[c] - (f(x[i]) - save_mean[c]) * kx[c]);
  }
}
}  // namespace

void bn_act_fwd(const void* x, const void* residual, const float* w, const float* b,
                float* running_mean, float* running_var, void* y, uint8_t* mask, float* save_mean,
                float* save_invstd, float* scratch, DType t, int64_t M, int64_t C, float eps,
                float momentum, bool relu) {
  if (M <= 0 || !bn_act_supports(C) || (relu && !mask) || t == DType::F32) bad("bn_act_fwd: arguments");
  CS_HOST_DISPATCH(t, T, bn_fwd<T>(static_cast<const T*>(x), static_cast<const T*>(residual), w, b,
                                   running_mean, running_var, static_cast<T*>(y), mask, save_mean,
                                   save_invstd, M, C, eps, momentum, relu));
}

void bn_act_bwd(const void* dy, const void* dy2, const uint8_t* mask, const void* x, const float* w,
                const float* save_mean, const float* save_invstd, void* dx, void* dresidual,
                float* dw, float* db, float* scratch, DType t, int64_t M, int64_t C, bool relu) {
  if (M <= 0 || !bn_act_supports(C) || (relu && !mask) || t == DType::F32 || (dy2 && !dresidual))
    bad("bn_act_bwd: arguments");
  CS_HOST_DISPATCH(t, T, bn_bwd<T>(static_cast<const T*>(dy), static_cast<const T*>(dy2), mask,
                                   static_cast<const T*>(x), w, save_mean, save_invstd,
                                   static_cast<T*>(dx), static_cast<T*>(dresidual), dw, db, M, C,
                                   relu));
}

// ---- max pooling ----------------------------------------------------------------

bool max_pool_supports(int64_t C, int64_t k, int64_t s, int64_t p) {
  return C >= 8 && C % 8 == 0 && k >= 1 && k * k <= 255 && s >= 1 && p >= 0 && 2 * p <= k;
}

namespace {
template <typename T>
void pool_fwd(const T* x, T* y, uint8_t* arg, int64_t N, int64_t H, int64_t W, int64_t C,
              int64_t Ho, int64_t Wo, int64_t k, int64_t s, int64_t p) {
  for (int64_t n = 0; n < N; n++)
    for (int64_t oh = 0; oh < Ho; oh++)
      for (int64_t ow = 0; ow < Wo; ow++)
        for (int64_t c = 0; c < C; c++) {
          const int64_t h0 = oh * s - p, w0 = ow * s - p;
          const int64_t kh0 = h0 < 0 ? -h0 : 0, kw0 = w0 < 0 ? -w0 : 0;
          // As PyTorch: the first element in range starts as the maximum; a
          // later one replaces it when larger or NaN.
          float best = -std::numeric_limits<float>::infinity();
          int64_t idx = kh0 * k + kw0;
          for (int64_t kh = kh0; kh < k && h0 + kh < H; kh++)
            for (int64_t kw = kw0; kw < k && w0 + kw < W; kw++) {
              const float v = f(x[((n * H + h0 + kh) * W + w0 + kw) * C + c]);
              if (v > best || std::isnan(v)) {
                best = v;
                idx = kh * k + kw;
              }
            }
          const int64_t o = ((n * Ho + oh) * Wo + ow) * C + c;
          y[o] = to<T>(best);
          arg[o] = uint8_t(idx);
        }
}

template <typename T>
void pool_bwd(const T* dy, const uint8_t* arg, T* dx, int64_t N, int64_t H, int64_t W, int64_t C,
              int64_t Ho, int64_t Wo, int64_t k, int64_t s, int64_t p) {
  std::vector<float> acc(size_t(N * H * W * C), 0.f);
  for (int64_t n = 0; n < N; n++)
    for (int64_t oh = 0; oh < Ho; oh++)
      for (int64_t ow = 0; ow < Wo; ow++)
        for (int64_t c = 0; c < C; c++) {
          const int64_t o = ((n * Ho + oh) * Wo + ow) * C + c;
          const int64_t h = oh * s - p + arg[o] / k, w = ow * s - p + arg[o] % k;
          acc[size_t(((n * H + h) * W + w) * C + c)] += f(dy[o]);
        }
  for (size_t i = 0; i < acc.size(); i++) dx[i] = to<T>(acc[i]);
}
}  // namespace

void max_pool_fwd(const void* x, void* y, uint8_t* arg, DType t, int64_t N, int64_t H, int64_t W,
                  int64_t C, int64_t Ho, int64_t Wo, int64_t k, int64_t s, int64_t p) {
  if (!max_pool_supports(C, k, s, p) || t == DType::F32) bad("max_pool_fwd: arguments");
  CS_HOST_DISPATCH(t, T, pool_fwd<T>(static_cast<const T*>(x), static_cast<T*>(y), arg, N, H, W, C,
                                     Ho, Wo, k, s, p));
}

void max_pool_bwd(const void* dy, const uint8_t* arg, void* dx, DType t, int64_t N, int64_t H,
                  int64_t W, int64_t C, int64_t Ho, int64_t Wo, int64_t k, int64_t s, int64_t p) {
  if (!max_pool_supports(C, k, s, p) || t == DType::F32) bad("max_pool_bwd: arguments");
  CS_HOST_DISPATCH(t, T, pool_bwd<T>(static_cast<const T*>(dy), arg, static_cast<T*>(dx), N, H, W,
                                     C, Ho, Wo, k, s, p));
}

// ---- the stem's rows -------------------------------------------------------------

bool stem_rows_supports(int64_t K) { return K > 0 && K % 8 == 0 && K / 8 <= 256; }

namespace {
template <typename TX, typename T>
void gather_rows(const TX* x, T* rows, int64_t N, int64_t H, int64_t W, int64_t C, int64_t Ho,
                 int64_t Wo, int64_t k, int64_t kw, int64_t s, int64_t p) {
  const int64_t K = k * kw * C;
  for (int64_t n = 0; n < N; n++)
    for (int64_t ho = 0; ho < Ho; ho++)
      for (int64_t wo = 0; wo < Wo; wo++) {
        T* row = rows + ((n * Ho + ho) * Wo + wo) * K;
        for (int64_t kh = 0; kh < k; kh++)
          for (int64_t dw = 0; dw < kw; dw++)
            for (int64_t c = 0; c < C; c++) {
              const int64_t h = ho * s - p + kh, w = wo * s - p + dw;
              const bool in = h >= 0 && h < H && w >= 0 && w < W;
              row[(kh * kw + dw) * C + c] = to<T>(in ? f(x[((n * H + h) * W + w) * C + c]) : 0.f);
            }
      }
}
}  // namespace

void stem_rows(const void* x, void* rows, DType tx, DType t, int64_t N, int64_t H, int64_t W,
               int64_t C, int64_t Ho, int64_t Wo, int64_t k, int64_t kw, int64_t s, int64_t p) {
  if (!stem_rows_supports(k * kw * C) || kw < k || s < 1 || p < 0) bad("stem_rows: arguments");
  CS_HOST_DISPATCH(tx, TX, CS_HOST_DISPATCH(t, T, gather_rows<TX, T>(static_cast<const TX*>(x),
                                                                      static_cast<T*>(rows), N, H,
                                                                      W, C, Ho, Wo, k, kw, s, p)));
}

// ---- casts of many tensors ----------------------------------------------------------

void cast_f32_many(const kern::CastJob* jobs, int count, DType to_dt) {
  if (count < 0 || (to_dt != DType::BF16 && to_dt != DType::F16)) bad("cast_f32_many: arguments");
  for (int j = 0; j < count; j++) {
    const kern::CastJob& job = jobs[j];
    if (job.n < 0 || (job.n > 0 && (!job.src || !job.dst))) bad("cast_f32_many: job");
    CS_HOST_DISPATCH(to_dt, T, {
      for (int64_t i = 0; i < job.n; i++) static_cast<T*>(job.dst)[i] = to<T>(job.src[i]);
    });
  }
}

// ---- AdamW over many tensors --------------------------------------------------------

// adamw.cu's arithmetic, the same float operations in the same order (the
// host's powf may round the bias corrections differently by an ulp).
void adamw_many(const kern::AdamwJob* jobs, int count, const kern::AdamwHyper& h, const float* step,
                const float* grad_scale, const float* found_inf) {
  if (count < 0 || !step) bad("adamw_many: arguments");
  for (int j = 0; j < count; j++) {
    const kern::AdamwJob& job = jobs[j];
    if (job.n < 0 || (job.n > 0 && (!job.param || !job.grad || !job.exp_avg || !job.exp_avg_sq)))
      bad("adamw_many: job");
    if (job.copy && job.copy_dt != DType::BF16 && job.copy_dt != DType::F16) bad("adamw_many: copy dtype");
  }
  if (found_inf && *found_inf != 0) return;
  const float lr = float(h.lr), beta1 = float(h.beta1), beta2 = float(h.beta2), eps = float(h.eps);
  const float bc1 = 1.f - std::pow(beta1, *step);
  const float bc2_sqrt = std::sqrt(1.f - std::pow(beta2, *step));
  const float step_size = lr / bc1;
  for (int j = 0; j < count; j++) {
    const kern::AdamwJob& job = jobs[j];
    const float wd = float(job.weight_decay), lr_wd = wd == 0 ? 0.f : lr * wd;
    for (int64_t i = 0; i < job.n; i++) {
      float g = job.grad[i], p = job.param[i], m = job.exp_avg[i], v = job.exp_avg_sq[i];
      if (grad_scale) g = g / *grad_scale;
      if (lr_wd != 0) p = std::fma(-lr_wd, p, p);
      m = std::fma(beta1, m, std::fma(-beta1, g, g));
      const float gg = g * g;
      v = std::fma(beta2, v, std::fma(-beta2, gg, gg));
      const float denom = std::sqrt(v) / bc2_sqrt + eps;
      const float update = step_size * m / denom;
      job.param[i] = p - update;
      job.exp_avg[i] = m;
      job.exp_avg_sq[i] = v;
      if (job.copy)  // the "adamc" copy: the updated parameter as stored, rounded as its cast
        CS_HOST_DISPATCH(job.copy_dt, T, { static_cast<T*>(job.copy)[i] = to<T>(job.param[i]); });
    }
  }
}

// ---- bias gradient with the activation's backward ---------------------------------

int64_t bias_act_bwd_scratch(int64_t, int64_t) { return 1; }

namespace {
template <typename T>
void bias_bwd(const T* dy, const T* z, T* dz, float* db, Act act, int64_t rows, int64_t C) {
  std::vector<double> sum(static_cast<size_t>(C), 0.0);
  for (int64_t row = 0; row < rows; row++)
    for (int64_t c = 0; c < C; c++) {
      const int64_t i = row * C + c;
      float g = f(dy[i]);
      if (act != Act::None) {
        dz[i] = to<T>(g * kern::act_grad(f(z[i]), act));
        g = f(dz[i]);  // the sum of dz as stored
      }
      sum[size_t(c)] += g;
    }
  for (int64_t c = 0; c < C; c++) db[c] = float(sum[size_t(c)]);
}
}  // namespace

void bias_act_bwd(const void* dy, const void* z, void* dz_out, float* db, float* scratch, DType t,
                  Act act, int64_t rows, int64_t C) {
  if (rows < 0 || C < 1 || (act != Act::None && (!z || !dz_out))) bad("bias_act_bwd: arguments");
  CS_HOST_DISPATCH(t, T, bias_bwd<T>(static_cast<const T*>(dy), static_cast<const T*>(z),
                                     static_cast<T*>(dz_out), db, act, rows, C));
}

void qkv_bwd(const kern::HeadsGrad& g, void* dz, float* db, float* scratch, DType t) {
  if (!kern::heads_grad_valid(g) || !dz) bad("qkv_bwd: arguments");
  const int64_t d = g.H * g.D, C = 3 * d, rows = g.B * g.T;
  CS_HOST_DISPATCH(t, T, {
    T* out = static_cast<T*>(dz);
    for (int64_t b = 0; b < g.B; b++)
      for (int64_t i = 0; i < g.T; i++)
        for (int s = 0; s < 3; s++)
          for (int64_t h = 0; h < g.H; h++)
            for (int64_t j = 0; j < g.D; j++)
              out[(b * g.T + i) * C + s * d + h * g.D + j] =
                  static_cast<const T*>(g.src[s])[b * g.stride[s][0] + h * g.stride[s][1] +
                                                  i * g.stride[s][2] + j];
    bias_bwd<T>(out, nullptr, nullptr, db, Act::None, rows, C);
  });
  (void)scratch;
}

void row_random(const kern::RowDraw& d, void* out) {
  if (d.rows < 0 || d.per_row < 0 || (d.kind == kern::RowKind::Randint && (d.span <= 0 || d.span > (int64_t(1) << 31))))
    bad("row_random: arguments");
  const int64_t n = d.per_row, half = (n + 1) / 2;
  for (int64_t r = 0; r < d.rows; r++) {
    const uint32_t rk = kern::row_key(d.key, d.row0 + r);
    float* f = static_cast<float*>(out) + r * n;
    int64_t* i = static_cast<int64_t*>(out) + r * n;
    for (int64_t j = 0; j < (d.kind == kern::RowKind::Normal ? half : n); j++) {
      const uint32_t b = kern::row_bits(rk, j);
      if (d.kind == kern::RowKind::Normal) {
        float c, s;
        kern::row_normal(b, kern::row_bits(rk, half + j), c, s);
        f[j] = c;
        if (half + j < n) f[half + j] = s;
      } else if (d.kind == kern::RowKind::Uniform) {
        f[j] = kern::row_uniform(b);
      } else {
        i[j] = d.kind == kern::RowKind::Randint ? int64_t(b % uint32_t(d.span)) + d.lo : int64_t(b);
      }
    }
  }
}

}  // namespace host
}  // namespace cs
