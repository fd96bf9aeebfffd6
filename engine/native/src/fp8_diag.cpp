// fp8_diag.cpp: see fp8_diag.h. Plain ATen (no FP8 type named here), so it
// builds, and its parsing is tested, against any libtorch.
#include "fp8_diag.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "model.h"  // ConfigError

namespace cs {
namespace fp8 {
namespace diag {

namespace {

int64_t count(const std::string& name, const std::string& v, const char* what) {
  if (v.empty()) return 0;
  char* end = nullptr;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  if (end == v.c_str() || *end != '\0' || n < 0)
    throw ConfigError("environment variable " + name + " must be " + what + " (0 or more), got \"" + v +
                      "\": unset it for none");
  return n;
}

}  // namespace

Settings parse(const std::function<std::string(const char*)>& get) {
  Settings s;
  s.audit_first = count("CASESTUDY_FP8_AUDIT", get("CASESTUDY_FP8_AUDIT"), "a count of backward passes");
  s.audit_every = count("CASESTUDY_FP8_AUDIT_EVERY", get("CASESTUDY_FP8_AUDIT_EVERY"),
                        "a period in forward passes");
  const auto gemm = get("CASESTUDY_FP8_E5M2_GEMM");
  if (!gemm.empty() && gemm != "tensorwise" && gemm != "rowwise")
    throw ConfigError("environment variable CASESTUDY_FP8_E5M2_GEMM must be tensorwise or rowwise, got \"" +
                      gemm + "\": unset it for tensorwise");
  s.e5m2_rowwise = gemm == "rowwise";
  const auto bwd = get("CASESTUDY_FP8_BWD");
  if (bwd.empty() || bwd == "scaled") {
    s.bwd = Bwd::Scaled;
  } else if (bwd == "emulate") {
    s.bwd = Bwd::Emulate;
  } else if (bwd == "qdq") {
    s.bwd = Bwd::Qdq;
  } else if (bwd == "exact") {
    s.bwd = Bwd::Exact;
  } else {
    throw ConfigError("environment variable CASESTUDY_FP8_BWD must be scaled, emulate, qdq or exact, got \"" +
                      bwd + "\": unset it for scaled");
  }
  const auto axis = get("CASESTUDY_FP8_GRAD_AXIS");
  if (!axis.empty() && axis != "tensor" && axis != "row")
    throw ConfigError("environment variable CASESTUDY_FP8_GRAD_AXIS must be tensor or row, got \"" + axis +
                      "\": unset it for tensor");
  s.grad_rows = axis == "row";
  const auto decor = get("CASESTUDY_FP8_GRAD_DECORRELATE");
  if (!decor.empty() && decor != "0" && decor != "1")
    throw ConfigError("environment variable CASESTUDY_FP8_GRAD_DECORRELATE must be 0 or 1, got \"" + decor +
                      "\": unset it for 0");
  s.decorrelate = decor == "1";
  const auto list = get("CASESTUDY_FP8_E5M2_FOR");
  unsigned products = 0, kinds = 0;
  std::stringstream in(list);
  std::string w;
  while (std::getline(in, w, ',')) {
    if (w == "dx") {
      products |= 1;
    } else if (w == "dw") {
      products |= 2;
    } else {
      bool found = false;
      for (int k = 0; k <= int(Kind::Other); k++) {
        if (w == kind_name(Kind(k))) {
          kinds |= 1u << k;
          found = true;
        }
      }
      if (!found)
        throw ConfigError("environment variable CASESTUDY_FP8_E5M2_FOR: \"" + w + "\" in \"" + list +
                          "\" is none of dx, dw, qkv, attn_out, mlp_up, mlp_down, other (a comma-separated "
                          "list; unset it for e5m2 everywhere)");
    }
  }
  s.e5m2_products = products ? products : kBothProducts;
  s.e5m2_kinds = kinds ? kinds : kAllKinds;
  return s;
}

Settings from_env() {
  return parse([](const char* name) {
    const char* v = std::getenv(name);
    return v ? std::string(v) : std::string();
  });
}

Kind kind_of(int64_t in, int64_t out) {
  if (out == 3 * in) return Kind::Qkv;
  if (out == in) return Kind::AttnOut;
  if (out == 4 * in) return Kind::MlpUp;
  if (in == 4 * out) return Kind::MlpDown;
  return Kind::Other;
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Qkv: return "qkv";
    case Kind::AttnOut: return "attn_out";
    case Kind::MlpUp: return "mlp_up";
    case Kind::MlpDown: return "mlp_down";
    default: return "other";
  }
}

const char* bwd_name(Bwd b) {
  switch (b) {
    case Bwd::Emulate: return "emulate";
    case Bwd::Qdq: return "qdq";
    case Bwd::Exact: return "exact";
    default: return "scaled";
  }
}

bool e5m2_for(const Settings& s, int product, Kind k) {
  return (s.e5m2_products >> product & 1u) && (s.e5m2_kinds >> int(k) & 1u);
}

torch::Tensor dequant_mm(const torch::Tensor& a, const torch::Tensor& sa, const torch::Tensor& b,
                         const torch::Tensor& sb) {
  auto af = a.to(at::kFloat) * sa;
  auto bf = sb.defined() ? b.to(at::kFloat) * sb : b.to(at::kFloat);
  return at::mm(af, bf);
}

Error compare(const torch::Tensor& got, const torch::Tensor& exact) {
  Error e;
  auto g = got.to(at::kDouble), x = exact.to(at::kDouble);
  auto d = g - x;
  const double xx = (x * x).sum().item<double>();
  e.rel = d.norm().item<double>() / std::max(std::sqrt(xx), 1e-300);
  e.gain = (d * x).sum().item<double>() / std::max(xx, 1e-300);
  e.bias = d.mean().item<double>() / std::max(x.abs().mean().item<double>(), 1e-300);
  e.signs = ((g * x) < 0).to(at::kDouble).mean().item<double>();
  e.nonfinite = (~torch::isfinite(got)).sum().item<int64_t>();
  return e;
}

std::string audit_line(int64_t pass, int64_t fwd, Kind kind, int64_t in, bool row, const char* dx_fmt,
                       const char* dw_fmt, const Settings& s, const torch::Tensor& dz,
                       const torch::Tensor& gq, const torch::Tensor& ginv, const torch::Tensor& x,
                       const torch::Tensor& w, const std::vector<Product>& products) {
  std::ostringstream o;
  o.precision(4);
  o << "fp8 audit pass=" << pass << " fwd=" << fwd << " kind=" << kind_name(kind) << " rows=" << dz.size(0)
    << " in=" << in << " out=" << dz.size(1) << " scaling=" << (row ? "row" : "tensor") << " dx=" << dx_fmt
    << " dw=" << dw_fmt << " bwd=" << bwd_name(s.bwd) << " gemm=" << (s.e5m2_rowwise ? "rowwise" : "tensorwise")
    << " grad_axis=" << (row || s.grad_rows ? "row" : "tensor") << " decorrelate=" << (s.decorrelate ? 1 : 0)
    << ":";
  auto nz = dz != 0;
  const double underflow =
      (nz & (gq.to(at::kFloat) == 0)).sum().item<double>() / std::max(1.0, nz.sum().item<double>());
  const auto cast = compare(gq.to(at::kFloat) * ginv, dz);
  auto rms = [](const torch::Tensor& t) { return t.to(at::kDouble).pow(2).mean().sqrt().item<double>(); };
  o << " dz amax=" << dz.abs().max().item<double>() << " rms=" << rms(dz) << " underflow=" << underflow
    << " cast_rel=" << cast.rel << " cast_gain=" << cast.gain << " cast_bias=" << cast.bias;
  if (x.defined()) o << "; x amax=" << x.abs().max().item<double>() << " rms=" << rms(x);
  if (w.defined()) o << "; w amax=" << w.abs().max().item<double>() << " rms=" << rms(w);
  for (const auto& q : products) {
    if (!q.p.defined()) continue;
    const auto ops = compare(q.p, dequant_mm(q.a, q.sa, q.b, q.sb));
    const auto ex = compare(q.p, q.exact);
    o << "; " << q.name << " ops=" << ops.rel << " rel=" << ex.rel << " gain=" << ex.gain << " bias=" << ex.bias
      << " signs=" << ex.signs << " nonfinite=" << ex.nonfinite;
  }
  return o.str();
}

}  // namespace diag
}  // namespace fp8
}  // namespace cs
