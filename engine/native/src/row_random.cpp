// row_random.cpp: see row_random.h. The mixer is lowbias32 (Chris Wellons'
// hash-prospector: xorshift-multiply rounds, a bijection on 32 bits with low
// bias), applied to int64 tensors that hold 32-bit values: a product is split
// into 16-bit halves so that nothing leaves int64's positive range. Where the
// "rand" kernel runs (kernels.h: a CUDA tensor in a build with the engine's
// kernels), each draw is that one pass instead (cuda/row_random.cu, the same
// values: row_random_test.cpp); the tensor ops are the CPU path and the
// kernel's reference.
#include "row_random.h"

#include <cmath>

#include "cuda/row_bits.h"
#include "kernels_glue.h"

namespace cs {
namespace {

constexpr int64_t kMask32 = 0xFFFFFFFFLL;
constexpr uint32_t kMul1 = 0x7feb352dU, kMul2 = 0x846ca68bU;

// The scalar mixer: the kernel's own (cuda/row_bits.h), for the step keys.
uint32_t mix(uint32_t x) { return kern::mix32(x); }

// (x * c) mod 2^32 for 0 <= x < 2^32.
torch::Tensor mulmod(const torch::Tensor& x, uint32_t c) {
  const int64_t lo = c & 0xFFFFu, hi = c >> 16;
  return (x * lo + (x * hi).bitwise_and(0xFFFF).__lshift__(16)).bitwise_and(kMask32);
}

torch::Tensor mix(torch::Tensor x) {
  x = x.bitwise_xor(x.__rshift__(16));
  x = mulmod(x, kMul1);
  x = x.bitwise_xor(x.__rshift__(15));
  x = mulmod(x, kMul2);
  return x.bitwise_xor(x.__rshift__(16));
}

}  // namespace

RowRandom::RowRandom(uint64_t seed, int64_t row0, int64_t rows, torch::Device device)
    : seed_(seed), row0_(row0), rows_(rows), device_(device) {}

uint32_t RowRandom::key(uint32_t stream) const {
  uint32_t k = mix(uint32_t(seed_) ^ mix(uint32_t(seed_ >> 32) ^ 0x9e3779b9U));
  k = mix(k ^ stream * 0x85ebca6bU);
  k = mix(k ^ uint32_t(step_));
  return mix(k ^ uint32_t(uint64_t(step_) >> 32));
}

torch::Tensor RowRandom::row_keys(uint32_t stream) const {
  auto opts = torch::TensorOptions().dtype(torch::kInt64).device(device_);
  auto rows = torch::arange(row0_, row0_ + rows_, opts).bitwise_and(kMask32);
  return mix(mix(rows).bitwise_xor(int64_t(key(stream)))).unsqueeze(1);
}

torch::Tensor RowRandom::kernel(kern::RowKind k, uint32_t stream, int64_t per_row, int64_t lo, int64_t span) const {
  if (!kernels::enabled("rand") || !(device_.is_cuda() || kernels::host_for_tests())) return {};
  const bool ints = k == kern::RowKind::Bits || k == kern::RowKind::Randint;
  auto out = torch::empty({rows_, per_row},
                          torch::TensorOptions().dtype(ints ? torch::kInt64 : torch::kFloat).device(device_));
  if (!glue::runs_here(out)) return {};
  const kern::RowDraw d{k, key(stream), row0_, rows_, per_row, lo, span};
  CS_KERNEL(out, "RowRandom's rand kernel", row_random, d, out.data_ptr());
  return out;
}

torch::Tensor RowRandom::bits(uint32_t stream, int64_t per_row) const {
  if (auto t = kernel(kern::RowKind::Bits, stream, per_row, 0, 0); t.defined()) return t;
  torch::NoGradGuard ng;
  auto opts = torch::TensorOptions().dtype(torch::kInt64).device(device_);
  // Two rounds over (row key xor element): a row's elements are as far apart
  // as different rows.
  auto e = mix(torch::arange(per_row, opts).bitwise_and(kMask32)).unsqueeze(0);
  return mix(mix(row_keys(stream).bitwise_xor(e)).bitwise_xor(int64_t(0x68e31da4)));
}

torch::Tensor RowRandom::uniform(uint32_t stream, int64_t per_row) const {
  if (auto t = kernel(kern::RowKind::Uniform, stream, per_row, 0, 0); t.defined()) return t;
  return bits(stream, per_row).__rshift__(8).to(torch::kFloat).mul_(1.0f / 16777216.0f);
}

torch::Tensor RowRandom::randint(uint32_t stream, int64_t per_row, int64_t lo, int64_t hi) const {
  TORCH_CHECK(hi > lo && hi - lo <= (int64_t(1) << 31), "RowRandom::randint: bad range [", lo, ", ", hi, ")");
  if (auto t = kernel(kern::RowKind::Randint, stream, per_row, lo, hi - lo); t.defined()) return t;
  return bits(stream, per_row).remainder(hi - lo).add_(lo);
}

torch::Tensor RowRandom::normal(uint32_t stream, int64_t per_row) const {
  if (auto t = kernel(kern::RowKind::Normal, stream, per_row, 0, 0); t.defined()) return t;
  const int64_t half = (per_row + 1) / 2;
  auto h = bits(stream, 2 * half);
  // u1 in (0, 1] so that log is finite; u2 in [0, 1).
  auto u1 = h.narrow(1, 0, half).__rshift__(8).add_(1).to(torch::kFloat).mul_(1.0f / 16777216.0f);
  auto u2 = h.narrow(1, half, half).__rshift__(8).to(torch::kFloat).mul_(1.0f / 16777216.0f);
  auto r = u1.log_().mul_(-2.0f).sqrt_();
  auto theta = u2.mul_(float(2.0 * M_PI));
  return torch::cat({r * theta.cos(), r * theta.sin()}, 1).narrow(1, 0, per_row).contiguous();
}

}  // namespace cs
