// fp8_ref.h: a plain C++ reference of the float -> FP8 conversions, for the
// fp8_cast suite (fp8_linear_test.cpp): IEEE-style round to nearest, ties to
// even, with subnormals; finite values beyond the largest finite one saturate
// to it (the fp8cast kernels' satfinite; the recipe never forms them). Written
// from the formats' definitions (OCP FP8: E4M3 bias 7, no infinity, largest
// 448, 0x7f NaN; E5M2 bias 15, largest 57344, 0x7c infinity), independent of
// CUDA's and c10's conversions, which the suite checks against it.
#pragma once

#include <cfenv>
#include <cmath>
#include <cstdint>

namespace cs {
namespace fp8ref {

struct Format {
  int mbits, bias;
  double max;
  uint8_t max_code, nan_code;
};
inline Format format(bool e5m2) {
  return e5m2 ? Format{2, 15, 57344.0, 0x7b, 0x7f} : Format{3, 7, 448.0, 0x7e, 0x7f};
}

// The value of code b (NaN for NaN codes, ±inf for E5M2's infinities).
inline double to_double(uint8_t b, bool e5m2) {
  const auto f = format(e5m2);
  const int ebits = 7 - f.mbits;
  const int e = (b >> f.mbits) & ((1 << ebits) - 1), m = b & ((1 << f.mbits) - 1);
  const double sign = (b & 0x80) ? -1.0 : 1.0;
  if (e5m2 && e == 31) return m == 0 ? sign * INFINITY : NAN;
  if (!e5m2 && e == 15 && m == 7) return NAN;
  if (e == 0) return sign * std::ldexp(double(m), 1 - f.bias - f.mbits);
  return sign * std::ldexp(double((1 << f.mbits) + m), e - f.bias - f.mbits);
}

// The code nearest to v (ties to even), saturating finite values to ±max.
inline uint8_t from_float(float v, bool e5m2) {
  const auto f = format(e5m2);
  if (std::isnan(v)) return f.nan_code;
  const uint8_t sign = std::signbit(v) ? 0x80 : 0;
  const double a = std::fabs(double(v));
  if (a >= f.max) return sign | f.max_code;  // satfinite (inf included)
  const int emin = 1 - f.bias;               // the smallest normal exponent
  int e = a > 0 ? std::ilogb(a) : emin;
  if (e < emin) e = emin;
  // a on the grid of its binade (or the subnormals'): quantum 2^(e - mbits).
  const double n = std::ldexp(a, f.mbits - e);  // exact: a power-of-two scaling
  const int old = std::fegetround();
  std::fesetround(FE_TONEAREST);
  const double r = std::nearbyint(n);  // ties to even
  std::fesetround(old);
  const double q = std::ldexp(r, e - f.mbits);
  if (q >= f.max) return sign | f.max_code;  // rounded up to max (or past it: saturate)
  if (q == 0) return sign;
  int qe = std::ilogb(q);
  if (qe < emin) return sign | uint8_t(r);  // subnormal: exponent field 0, mantissa r
  const int mant = int(std::ldexp(q, f.mbits - qe)) - (1 << f.mbits);
  return sign | uint8_t(((qe + f.bias) << f.mbits) | mant);
}

}  // namespace fp8ref
}  // namespace cs
