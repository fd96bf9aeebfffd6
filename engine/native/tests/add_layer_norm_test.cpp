// add_layer_norm_test.cpp: add_layer_norm (src/add_layer_norm.h) against a
// float64 reference (the sum rounded to x's dtype as stored, then LayerNorm
// and its gradients in float64), forward and backward, for the dtype
// combinations the models use, shapes from tiny and odd (the kernel's
// unvectorised path) to the real ones (GPT-2 124M 16 x 1024 x 768, BERT-large
// 32 x 512 x 1024), with and without a delta and an incoming residual
// gradient. On CUDA the "ln" kernel's errors must stay within twice those of
// the portable path (libtorch's LayerNorm in the output dtype, as
// block_layer_norm runs it) on the same inputs, the measured floor, plus
// fp32's rounding level of a sum over the rows.
#include <torch/torch.h>

#include <cmath>
#include <iostream>
#include <string>
#include <tuple>
#include <vector>

#include "add_layer_norm.h"
#include "compat.h"
#include "cuda/ln_keep.h"
#include "kernels.h"
#include "linear_act.h"
#include "native_test.h"

using namespace cs;

namespace {

struct Out {
  torch::Tensor r, y, dx, ddelta, dw, db;
};

// One forward and backward of add_layer_norm, or of the float64 reference
// (ref), with upstream gradients gy (on y) and gr (on r; undefined: none).
Out run(bool ref, const torch::Tensor& x0, const torch::Tensor& d0, const torch::Tensor& w0,
        const torch::Tensor& b0, const torch::Tensor& gy, const torch::Tensor& gr,
        at::ScalarType out) {
  const double eps = 1e-5;
  const auto f64 = torch::kFloat64;
  // The reference's leaves are float64 copies, so that its gradients are not rounded.
  auto leaf = [&](const torch::Tensor& t) {
    return (ref ? t.to(f64) : t.clone()).requires_grad_(true);
  };
  auto x = leaf(x0);
  auto d = d0.defined() ? leaf(d0) : torch::Tensor();
  auto w = leaf(w0), b = leaf(b0);
  Out o;
  if (ref) {
    torch::Tensor rs;  // r as stored in x's dtype
    {
      torch::NoGradGuard ng;
      rs = d0.defined() ? (x0.to(torch::kFloat32) + d0.to(torch::kFloat32)).to(x0.scalar_type())
                        : x0;
    }
    // r's value as stored; its gradient passes straight through to x and delta.
    auto r64 = rs.to(f64) + (x - x.detach());
    if (d.defined()) r64 = r64 + (d - d.detach());
    auto y = torch::layer_norm(r64, {x0.size(-1)}, w, b, eps);
    auto loss = (y * gy.to(f64)).sum();
    if (gr.defined()) loss = loss + (r64 * gr.to(f64)).sum();
    loss.backward();
    o.r = rs;
    o.y = y.detach();
  } else {
    auto a = add_layer_norm(x, d, w, b, eps, out);
    TORCH_CHECK(a.y.scalar_type() == out && a.r.scalar_type() == x.scalar_type(),
                "add_layer_norm: output dtypes");
    // The kernel's r, with or without a delta, is an output of the same node
    // as y: its gradient is added inside the backward kernel, not by autograd.
    TORCH_CHECK(!add_layer_norm_fused(x, d, out) || a.r.grad_fn() == a.y.grad_fn(),
                "add_layer_norm: r and y from one node");
    std::vector<torch::Tensor> outs{a.y}, grads{gy};
    if (gr.defined()) {
      outs.push_back(a.r);
      grads.push_back(gr);
    }
    torch::autograd::backward(outs, grads);
    o.r = a.r.detach();
    o.y = a.y.detach();
  }
  o.dx = x.grad();
  if (d.defined()) o.ddelta = d.grad();
  o.dw = w.grad();
  o.db = b.grad();
  return o;
}

struct Case {
  int64_t rows, C;
  at::ScalarType tx, td, out;  // td Undefined: no delta
  bool residual_grad;
  bool misaligned;  // x and delta start one element past an aligned address
};

std::string name(const Case& c) {
  auto n = [](at::ScalarType t) -> std::string {
    return t == at::ScalarType::Undefined ? "none" : c10::toString(t);
  };
  return std::to_string(c.rows) + "x" + std::to_string(c.C) + " x " + n(c.tx) + " delta " +
         n(c.td) + " out " + n(c.out) + (c.residual_grad ? " +dr" : "") +
         (c.misaligned ? " misaligned" : "");
}

// A [rows, C] tensor of dtype t from src, optionally one element past an aligned start.
torch::Tensor place(const torch::Tensor& src, at::ScalarType t, bool misaligned) {
  if (!misaligned) return src.to(t).contiguous();
  auto buf = torch::empty({src.numel() + 1}, src.options().dtype(t));
  auto v = buf.narrow(0, 1, src.numel()).view(src.sizes());
  v.copy_(src);
  return v;
}

int check_case(const Case& c, torch::Device dev, bool kernel) {
  torch::manual_seed(uint64_t(c.rows * 131 + c.C));
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(dev);
  // A residual stream with an offset and spread per row (as in a trained model).
  auto x = place(torch::randn({c.rows, c.C}, f32) * 3 + torch::randn({c.rows, 1}, f32), c.tx,
                 c.misaligned);
  const bool has_delta = c.td != at::ScalarType::Undefined;
  auto d = has_delta ? place(torch::randn({c.rows, c.C}, f32), c.td, c.misaligned) : torch::Tensor();
  auto w = 1 + 0.1 * torch::randn({c.C}, f32), b = 0.1 * torch::randn({c.C}, f32);
  auto gy = torch::randn({c.rows, c.C}, f32).to(c.out);
  auto gr = c.residual_grad ? torch::randn({c.rows, c.C}, f32).to(c.tx) : torch::Tensor();

  auto ref = run(true, x, d, w, b, gy, gr, c.out);
  kernels::set_for_tests("native");
  auto portable = run(false, x, d, w, b, gy, gr, c.out);
  if (!kernel) {
    // The portable path against the reference (a check of this test's
    // reference): y within three roundings to the output dtype (of r, of the
    // weights, of y: each at most u / 2 relative), the gradients within 4 u.
    const double u = c.out == torch::kBFloat16 ? 1.0 / 256 : c.out == torch::kHalf ? 1.0 / 2048 : 1e-6;
    CS_CHECK(rel_err(portable.y, ref.y) < 1.5 * u);
    CS_CHECK(rel_err(portable.dx, ref.dx) < 4 * u);
    CS_CHECK(rel_err(portable.dw, ref.dw) < 4 * u);
    return 0;
  }
  kernels::set_for_tests("ln");
  CS_CHECK(add_layer_norm_fused(x, d, c.out));
  auto got = run(false, x, d, w, b, gy, gr, c.out);
  auto again = run(false, x, d, w, b, gy, gr, c.out);
  kernels::set_for_tests("");
  // r is the sum as stored: exact.
  CS_CHECK(torch::equal(got.r, ref.r.to(got.r.scalar_type())));
  struct Cmp {
    const char* what;
    torch::Tensor got, portable, ref;
  };
  std::vector<Cmp> cmps{{"y", got.y, portable.y, ref.y},
                        {"dx", got.dx, portable.dx, ref.dx},
                        {"dw", got.dw, portable.dw, ref.dw},
                        {"db", got.db, portable.db, ref.db}};
  if (has_delta) cmps.push_back({"ddelta", got.ddelta, portable.ddelta, ref.ddelta});
  for (const auto& m : cmps) {
    CS_CHECK(m.got.sizes() == m.ref.sizes());
    CS_CHECK(m.got.scalar_type() == m.portable.scalar_type());
    CS_CHECK(m.got.defined() && m.portable.defined());
    const double e = rel_err(m.got, m.ref), floor = rel_err(m.portable, m.ref);
    // Plus fp32's rounding of a sum over the rows (sqrt(rows) 2^-24, dw and
    // db): the level at which two orders of summation differ.
    if (!(e <= 2 * floor + std::sqrt(double(c.rows)) * std::ldexp(1.0, -24))) {
      std::cerr << "FAIL add_layer_norm " << name(c) << ": " << m.what << " error " << e
                << " > 2 x the portable path's " << floor << "\n";
      return 1;
    }
  }
  // Deterministic: the same inputs give the same bits.
  CS_CHECK(torch::equal(got.y, again.y) && torch::equal(got.dx, again.dx) &&
           torch::equal(got.dw, again.dw) && torch::equal(got.db, again.db));
  return 0;
}

// add_layer_norm_twin with the kernel: y twice from one node, the two
// gradients (either one absent: that twin unused) added by the backward
// kernel, bit for bit as add_layer_norm's y used twice (autograd adding them
// first, rounded to y's dtype); with "res" off both twins are the one y.
int check_twin(const Case& c, torch::Device dev) {
  torch::manual_seed(uint64_t(c.rows * 7 + c.C));
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(dev);
  auto x0 = (torch::randn({c.rows, c.C}, f32) * 3).to(c.tx);
  const bool has_delta = c.td != at::ScalarType::Undefined;
  auto d0 = has_delta ? torch::randn({c.rows, c.C}, f32).to(c.td) : torch::Tensor();
  auto w0 = 1 + 0.1 * torch::randn({c.C}, f32), b0 = 0.1 * torch::randn({c.C}, f32);
  auto g1 = torch::randn({c.rows, c.C}, f32).to(c.out), g2 = torch::randn({c.rows, c.C}, f32).to(c.out);
  struct Grads {
    torch::Tensor y, dx, dd, dw, db;
  };
  // use: 1 the first y only, 2 the second only, 3 both.
  auto step = [&](bool twin, int use) {
    auto x = x0.clone().requires_grad_(true);
    auto d = has_delta ? d0.clone().requires_grad_(true) : torch::Tensor();
    auto w = w0.clone().requires_grad_(true), b = b0.clone().requires_grad_(true);
    torch::Tensor y, y2;
    if (twin) {
      std::tie(y, y2) = add_layer_norm_twin(x, d, w, b, 1e-5, c.out);
      TORCH_CHECK(y.grad_fn() && y2.grad_fn() == y.grad_fn() && !y.is_same(y2), "twin: one node, two tensors");
    } else {
      y = add_layer_norm(x, d, w, b, 1e-5, c.out).y;
      y2 = y;
    }
    std::vector<torch::Tensor> outs, grads;
    if (use & 1) {
      outs.push_back(y);
      grads.push_back(g1);
    }
    if (use & 2) {
      outs.push_back(y2);
      grads.push_back(g2);
    }
    torch::autograd::backward(outs, grads);
    return Grads{y.detach(), x.grad(), has_delta ? d.grad() : torch::Tensor(), w.grad(), b.grad()};
  };
  for (int use : {3, 1, 2}) {
    kernels::set_for_tests("ln,res");
    auto twice = step(true, use);
    kernels::set_for_tests("ln");
    auto once = step(false, use);
    kernels::set_for_tests("");
    CS_CHECK(torch::equal(once.y, twice.y) && torch::equal(once.dx, twice.dx));
    CS_CHECK(torch::equal(once.dw, twice.dw) && torch::equal(once.db, twice.db));
    CS_CHECK(!has_delta || torch::equal(once.dd, twice.dd));
  }
  kernels::set_for_tests("ln");
  auto one = add_layer_norm_twin(x0, d0, w0, b0, 1e-5, c.out);
  kernels::set_for_tests("");
  CS_CHECK(one.first.is_same(one.second));
  return 0;
}

// "lny": add_layer_norm_twin storing r only in the columns kern::ln_keeps_r
// picks (cuda/ln_keep.h), its backward from y in the others. y bit for bit
// the r path's (r recomputed as it would have been stored); the gradients
// against the float64 reference, given the twins' gradients added in the
// output dtype (as the kernel and autograd add them), within the r path's
// bound: twice the portable path's errors plus fp32's rounding of a sum over
// the rows. Deterministic. gamma: the LayerNorm weight as usual (Gamma::Usual,
// 1 + 0.1 N(0, 1)), or with every eighth column's 1e-3 times that
// (Gamma::Tiny; from column 3), and besides every eighth column's 0
// (Gamma::Zero; from column 0): columns whose x^ y does not give back (|b|
// ~ 0.1 > |w|), kept. With these the case prints the errors against the
// reference (lny's, the r path's).
enum class Gamma { Usual, Tiny, Zero };

int check_lny(const Case& c, torch::Device dev, Gamma gamma = Gamma::Usual) {
  torch::manual_seed(uint64_t(c.rows * 11 + c.C));
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(dev);
  auto x0 = (torch::randn({c.rows, c.C}, f32) * 3 + torch::randn({c.rows, 1}, f32)).to(c.tx);
  const bool has_delta = c.td != at::ScalarType::Undefined;
  auto d0 = has_delta ? torch::randn({c.rows, c.C}, f32).to(c.td) : torch::Tensor();
  auto w0 = 1 + 0.1 * torch::randn({c.C}, f32), b0 = 0.1 * torch::randn({c.C}, f32);
  auto col = torch::arange(c.C, f32).remainder(8), none = torch::zeros({c.C}, f32.dtype(torch::kBool));
  auto tiny = gamma != Gamma::Usual ? col == 3 : none, zero = gamma == Gamma::Zero ? col == 0 : none;
  w0 = torch::where(tiny, w0 * 1e-3, torch::where(zero, torch::zeros_like(w0), w0));
  auto g1 = torch::randn({c.rows, c.C}, f32).to(c.out), g2 = torch::randn({c.rows, c.C}, f32).to(c.out);
  auto gsum = (g1.to(torch::kFloat32) + g2.to(torch::kFloat32)).to(c.out);
  auto ref = run(true, x0, d0, w0, b0, gsum, torch::Tensor(), c.out);
  kernels::set_for_tests("native");
  auto portable = run(false, x0, d0, w0, b0, gsum, torch::Tensor(), c.out);
  auto step = [&](const char* k) {
    kernels::set_for_tests(k);
    auto x = x0.clone().requires_grad_(true);
    auto d = has_delta ? d0.clone().requires_grad_(true) : torch::Tensor();
    auto w = w0.clone().requires_grad_(true), b = b0.clone().requires_grad_(true);
    auto yy = add_layer_norm_twin(x, d, w, b, 1e-5, c.out);
    TORCH_CHECK(yy.first.grad_fn() && yy.second.grad_fn() == yy.first.grad_fn(), "lny: one node");
    torch::autograd::backward({yy.first, yy.second}, {g1, g2});
    kernels::set_for_tests("");
    Out o;
    o.y = yy.first.detach();
    o.dx = x.grad();
    if (has_delta) o.ddelta = d.grad();
    o.dw = w.grad();
    o.db = b.grad();
    return o;
  };
  auto got = step("ln,res,lny"), again = step("ln,res,lny"), rpath = step("ln,res");
  CS_CHECK(torch::equal(got.y, rpath.y));
  // The kept columns, as the kernel picks them.
  auto wc = w0.cpu(), bc = b0.cpu();
  auto kept = torch::zeros({c.C}, torch::kBool);
  for (int64_t j = 0; j < c.C; j++)
    kept[j] = kern::ln_keeps_r(wc[j].item<float>(), bc[j].item<float>());
  kept = kept.to(dev);
  CS_CHECK(kept.logical_or(zero.logical_not()).all().item<bool>());  // w 0: kept
  if (gamma != Gamma::Usual) {
    auto at_cols = [&](const torch::Tensor& t, const torch::Tensor& m) { return t.index({m}); };
    auto errs = [&](const char* what, const torch::Tensor& g, const torch::Tensor& r, const torch::Tensor& ref_t) {
      std::cout << "    " << what << " " << rel_err(g, ref_t) << " (r path " << rel_err(r, ref_t) << ")";
    };
    std::cout << "  lny, w 1e-3 x in columns 3 mod 8" << (gamma == Gamma::Zero ? ", 0 in 0 mod 8" : "")
              << ", " << name(c) << ": " << kept.sum().item<int64_t>()
              << " columns keep r; errors against float64, lny's (the r path's):\n";
    errs("dx", got.dx, rpath.dx, ref.dx);
    errs("dw", got.dw, rpath.dw, ref.dw);
    errs("dw at w 1e-3 x", at_cols(got.dw, tiny), at_cols(rpath.dw, tiny), at_cols(ref.dw, tiny));
    if (gamma == Gamma::Zero)
      errs("dw at w 0", at_cols(got.dw, zero), at_cols(rpath.dw, zero), at_cols(ref.dw, zero));
    errs("db", got.db, rpath.db, ref.db);
    std::cout << "\n";
  }
  struct Cmp {
    const char* what;
    torch::Tensor got, portable, ref, rpath;
  };
  std::vector<Cmp> cmps{{"dx", got.dx, portable.dx, ref.dx, rpath.dx},
                        {"dw", got.dw, portable.dw, ref.dw, rpath.dw},
                        {"db", got.db, portable.db, ref.db, rpath.db}};
  if (has_delta) cmps.push_back({"ddelta", got.ddelta, portable.ddelta, ref.ddelta, rpath.ddelta});
  for (const auto& m : cmps) {
    CS_CHECK(m.got.defined() && m.got.scalar_type() == m.portable.scalar_type());
    const double e = rel_err(m.got, m.ref), floor = rel_err(m.portable, m.ref);
    if (!(e <= 2 * floor + std::sqrt(double(c.rows)) * std::ldexp(1.0, -24))) {
      std::cerr << "FAIL add_layer_norm lny " << name(c) << ": " << m.what << " error " << e
                << " > 2 x the portable path's " << floor << " (the r path's "
                << rel_err(m.rpath, m.ref) << ")\n";
      return 1;
    }
  }
  CS_CHECK(torch::equal(got.dx, again.dx) && torch::equal(got.dw, again.dw) &&
           torch::equal(got.db, again.db));
  // Against the r path, element by element: y as stored is within u |y| of
  // its exact value (u the output dtype's unit roundoff), so x^ from y within
  // e = u |y| / |w| of x^ from r. Hence |dw - dw_r| <= sum over rows of |g| e,
  // and before dx's rounding |dx - dx_r| <= rstd (e |mgx| + |x^| mean(|g w| e))
  // (dx = rstd (g w - mean(g w) - x^ mgx), mgx = mean(g w x^)); the roundings
  // to dx's dtype add up to one unit roundoff of each side, fp32's arithmetic
  // 2^-20 of the terms. db does not depend on x^: equal.
  CS_CHECK(torch::equal(got.db, rpath.db));
  if (has_delta) {
    auto unit = [](at::ScalarType t) {
      return std::ldexp(1.0, t == torch::kBFloat16 ? -8 : t == torch::kHalf ? -11 : -24);
    };
    const auto f64 = torch::kFloat64;
    auto g = gsum.to(f64), w = w0.to(f64), y = rpath.y.to(f64);
    // x^ from y within u |y| / |w|; in the kept columns x^ is the r path's.
    auto e = torch::where(kept, torch::zeros_like(y), unit(c.out) * y.abs() / w.abs());
    torch::Tensor r;
    {
      torch::NoGradGuard ng;
      r = (x0.to(torch::kFloat32) + d0.to(torch::kFloat32)).to(c.tx).to(f64);
    }
    auto mean = r.mean(-1, true), var = (r - mean).square().mean(-1, true);
    auto rs = 1.0 / (var + 1e-5).sqrt(), xh = (r - mean) * rs;
    auto gw = g * w, mgx = (gw * xh).mean(-1, true);
    auto arith = std::ldexp(1.0, -20) * rs * (gw.abs() + gw.mean(-1, true).abs() + (xh * mgx).abs());
    auto pre = rs * (e * mgx.abs() + xh.abs() * (gw.abs() * e).mean(-1, true)) + arith;
    auto within = [&](const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& bound,
                      const char* what) {
      auto err = (a.to(f64) - b.to(f64)).abs();
      if ((err <= bound).all().item<bool>()) return true;
      std::cerr << "FAIL add_layer_norm lny " << name(c) << ": " << what << " off the r path's by "
                << (err - bound).max().item<double>() << " past the bound of y's rounding\n";
      return false;
    };
    const double ux = unit(c.tx), ud = unit(c.td);
    auto dxr = rpath.dx.to(f64).abs(), ddr = rpath.ddelta.to(f64).abs();
    if (!within(got.dw, rpath.dw, (g.abs() * e).sum(0) + std::ldexp(1.0, -20) * (g * xh).abs().sum(0), "dw") ||
        !within(got.dx, rpath.dx, pre * (1 + 2 * ux) + 2 * ux * dxr, "dx") ||
        !within(got.ddelta, rpath.ddelta, pre * (1 + 2 * ud) + 2 * ud * ddr, "ddelta"))
      return 1;
  } else {
    CS_CHECK(torch::equal(got.dx, rpath.dx) && torch::equal(got.dw, rpath.dw));  // x^ from r = x
  }
  return 0;
}

// "lnb": linear_add_layer_norm_twin (BERT's projection, residual add and
// LayerNorm) against the composition it stands for, add_layer_norm_twin of
// linear_act's output with "lnb" off, under autocast dt, with "lny" off and
// on: y and every gradient bit for bit but the projection's bias gradient,
// which both sum in fp32 from the same values of the projection's output
// gradient dz in different orders: each within fp32's summation bound
// (rows 2^-24 sum |dz| a column) of dz's float64 column sums.
int check_lnb(int64_t B, int64_t T, int64_t C, int64_t I, at::ScalarType dt, torch::Device dev) {
  torch::manual_seed(uint64_t(B * T * 3 + C + I));
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(dev);
  auto x0 = (torch::randn({B, T, C}, f32) * 2).to(dt);
  auto xl0 = torch::randn({B, T, I}, f32).to(dt);
  auto lw0 = torch::randn({C, I}, f32) / std::sqrt(double(I)), lb0 = 0.5 * torch::randn({C}, f32);
  auto w0 = 1 + 0.1 * torch::randn({C}, f32), b0 = 0.1 * torch::randn({C}, f32);
  auto g1 = torch::randn({B, T, C}, f32).to(dt), g2 = torch::randn({B, T, C}, f32).to(dt);
  struct Got {
    torch::Tensor y, dx, dxl, dlw, dlb, dw, db, dz;
  };
  auto step = [&](const std::string& k, bool lnb) {
    kernels::set_for_tests(k);
    auto x = x0.clone().requires_grad_(true), xl = xl0.clone().requires_grad_(true);
    auto lw = lw0.clone().requires_grad_(true), lb = lb0.clone().requires_grad_(true);
    auto w = w0.clone().requires_grad_(true), b = b0.clone().requires_grad_(true);
    compat::set_autocast(dev.type(), true, dt);
    TORCH_CHECK(linear_add_layer_norm_fused(x, xl, lw, dt) == lnb, "lnb: fused as switched");
    std::pair<torch::Tensor, torch::Tensor> yy;
    torch::Tensor delta;
    if (lnb) {
      yy = linear_add_layer_norm_twin(x, xl, lw, lb, w, b, 1e-12, dt);
    } else {
      delta = linear_act(xl, lw, lb, Act::None);
      delta.retain_grad();
      yy = add_layer_norm_twin(x, delta, w, b, 1e-12, dt);
    }
    compat::set_autocast(dev.type(), false, dt);
    at::autocast::clear_cache();
    torch::autograd::backward({yy.first, yy.second}, {g1, g2});
    kernels::set_for_tests("");
    return Got{yy.first.detach(), x.grad(), xl.grad(), lw.grad(), lb.grad(), w.grad(), b.grad(),
               delta.defined() ? delta.grad() : torch::Tensor()};
  };
  for (const std::string base : {"ln,lin,res", "ln,lin,res,lny"}) {
    auto off = step(base, false), on = step(base + ",lnb", true), again = step(base + ",lnb", true);
    CS_CHECK(torch::equal(on.y, off.y) && torch::equal(on.dx, off.dx) && torch::equal(on.dxl, off.dxl));
    CS_CHECK(torch::equal(on.dlw, off.dlw) && torch::equal(on.dw, off.dw) && torch::equal(on.db, off.db));
    CS_CHECK(on.dlb.defined() && on.dlb.scalar_type() == lb0.scalar_type());
    CS_CHECK(torch::equal(on.dlb, again.dlb));  // deterministic
    auto dz = off.dz.reshape({-1, C}).to(torch::kFloat64);
    auto exact = dz.sum(0);
    auto bound = dz.abs().sum(0) * (double(B * T) * std::ldexp(1.0, -24));
    for (const auto& got : {on.dlb, off.dlb}) {
      auto err = (got.to(torch::kFloat64) - exact).abs();
      if (!(err <= bound).all().item<bool>()) {
        std::cerr << "FAIL add_layer_norm lnb " << base << ": bias gradient off the column sums by "
                  << (err - bound).max().item<double>() << " past fp32's bound\n";
        return 1;
      }
    }
  }
  return 0;
}

}  // namespace

int add_layer_norm_tests() {
  const auto F = torch::kFloat32, B = torch::kBFloat16, H = torch::kHalf;
  const auto none = at::ScalarType::Undefined;
  std::vector<Case> cases = {
      // GPT blocks: fp32 residual stream, bf16/fp16 matmul outputs and LayerNorm outputs.
      {64, 768, F, B, B, true, false},
      {64, 768, F, none, B, false, false},
      {37, 64, F, H, H, true, false},
      {5, 100, F, B, B, true, false},      // C not a multiple of 8: unvectorised
      {33, 768, F, B, B, true, true},      // misaligned: unvectorised
      {3, 1600, F, B, B, true, false},     // GPT-2 1.5B's width
      {9, 512, F, B, B, true, false},      // the row-in-registers backward's widths: 512, 768, 1024
      // BERT: bf16 / fp16 residual stream; embeddings fp32 + fp32.
      {64, 1024, B, B, B, false, false},
      {64, 1024, H, H, H, false, false},
      {64, 1024, F, F, B, false, false},
      {7, 8, B, none, B, true, false},
  };
  bool cuda = torch::cuda::is_available();
  auto check = [](const Case& c, torch::Device dev, bool kernel) {
    return run_case("add_layer_norm", name(c) + " (" + dev.str() + ")", [&] { return check_case(c, dev, kernel); });
  };
  for (const auto& c : cases) {
    if (c.out == torch::kHalf) continue;  // no fp16 LayerNorm on libtorch 1.13's CPU
    if (int rc = check(c, torch::kCPU, false)) return rc;
  }
  std::cout << "  add_layer_norm portable cpu ok\n";
  // The ln kernel's host version through the same autograd function as on the
  // GPU (its arguments, saved tensors and gradients), with and without a delta.
  {
    HostKernels host;
    for (const auto& c : cases) {
      if (c.out == torch::kHalf) continue;
      if (int rc = check(c, torch::kCPU, true)) return rc;
    }
  }
  // y twice (BERT's LayerNorm outputs): both gradients, or either alone;
  // then without r ("lny"), and with the projection's bias gradient summed in
  // the backward ("lnb").
  auto bert = [&](torch::Device dev) {
    for (const auto& c : cases) {
      if (dev.is_cpu() && c.out == torch::kHalf) continue;
      if (c.misaligned || c.residual_grad) continue;
      const std::string n = name(c) + " (" + dev.str() + ")";
      if (int rc = run_case("add_layer_norm twin", n, [&] { return check_twin(c, dev); })) return rc;
      if (int rc = run_case("add_layer_norm lny", n, [&] { return check_lny(c, dev); })) return rc;
      if (c.td == at::ScalarType::Undefined) continue;  // no delta: x^ from r = x, not from y
      for (auto gm : {Gamma::Tiny, Gamma::Zero})
        if (int rc = run_case("add_layer_norm lny small w", n, [&] { return check_lny(c, dev, gm); })) return rc;
    }
    struct L {
      int64_t B, T, C, I;
      at::ScalarType dt;
    };
    std::vector<L> ls = {{2, 5, 64, 96, torch::kBFloat16}, {1, 3, 100, 36, torch::kBFloat16}};
    if (dev.is_cuda()) {
      ls.push_back({2, 33, 1024, 1024, torch::kHalf});
      ls.push_back({32, 512, 1024, 4096, torch::kBFloat16});  // BERT-large 512's MLP output
    }
    for (const auto& l : ls)
      if (int rc = run_case("add_layer_norm lnb",
                            std::to_string(l.B) + "x" + std::to_string(l.T) + "x" + std::to_string(l.C) +
                                " from " + std::to_string(l.I) + " " + c10::toString(l.dt) + " (" +
                                dev.str() + ")",
                            [&] { return check_lnb(l.B, l.T, l.C, l.I, l.dt, dev); }))
        return rc;
    return 0;
  };
  {
    HostKernels host;
    if (int rc = bert(torch::kCPU)) return rc;
  }
  std::cout << "  add_layer_norm ln kernel's host version cpu ok (y twice too; lny, lnb)\n";
  if (!cuda) return 0;
  torch::Device dev(torch::kCUDA, 0);
  if (!kernels::compiled()) {
    std::cout << "  add_layer_norm: no CUDA kernels in this build\n";
    return 0;
  }
  // The real shapes: GPT-2 124M 16 x 1024 tokens, BERT-large 32 x 512.
  cases.push_back({16 * 1024, 768, F, B, B, true, false});
  cases.push_back({16 * 1024, 768, F, none, B, false, false});
  cases.push_back({32 * 512, 1024, B, B, B, false, false});
  cases.push_back({32 * 512, 1024, F, F, B, false, false});
  for (const auto& c : cases)
    if (int rc = check(c, dev, true)) return rc;
  if (int rc = bert(dev)) return rc;
  std::cout << "  add_layer_norm ln kernel cuda ok (" << cases.size() << " cases, y twice too; lny, lnb)\n";
  return 0;
}
