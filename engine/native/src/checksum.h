// checksum.h: the parameter checksum (cs_param_checksum): a float64 sum and a
// 64-bit hash of the parameters' bits, computed where the parameters live (on
// the GPU: a few kernels per tensor and two small copies to the host, instead
// of copying every parameter to the host and hashing it byte by byte there).
//
// The hash (a multilinear hash over 64-bit words, modulo 2^64):
//   each tensor's elements in logical (row-major) order, each element's bits
//   read as a signed integer of its width and widened to 64 bits (w_j); the
//   elements cut into chunks of kChecksumChunk; the tensor's value
//     h = sum over chunks c of  m(c) * sum over j in c of  w_j * k(j mod kChecksumChunk)
//   with odd keys k(i) = splitmix64(i) | 1 and chunk multipliers
//   m(c) = splitmix64(c ^ kChunkSalt) | 1; then the tensors in order, with
//   their element counts, folded by FNV-1a over 64-bit values:
//     H = offset; for each tensor: H = (H ^ h) * prime; H = (H ^ numel) * prime
// Integer sums do not depend on the order of addition, so every device and
// every reduction order gives the same bits (the unit test checks the torch
// path against a scalar loop of this definition). Any one changed element
// changes H (its key is odd, so the change survives the multiplication);
// swapped elements or tensors change it unless their keys collide by chance.
// The sum adds each tensor's float64 sum (torch's reduction on its device) in
// order: identical ranks on identical devices agree exactly, other devices
// within rounding.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace cs {

constexpr int64_t kChecksumChunk = int64_t(1) << 16;
constexpr uint64_t kChecksumChunkSalt = 0xD1B54A32D192ED03ULL;
constexpr uint64_t kFnvOffset = 1469598103934665603ULL, kFnvPrime = 1099511628211ULL;

uint64_t splitmix64(uint64_t x);
inline uint64_t checksum_key(int64_t i) { return splitmix64(uint64_t(i)) | 1; }
inline uint64_t checksum_chunk_multiplier(int64_t c) {
  return splitmix64(uint64_t(c) ^ kChecksumChunkSalt) | 1;
}

struct ParamChecksum {
  double sum = 0;
  uint64_t hash = kFnvOffset;
  std::string hex() const;  // 16 lower-case hex digits
};

// The checksum of tensors (any devices, any dtypes of 1, 2, 4 or 8 bytes).
// Synchronises with their devices (the small results are copied to the host).
ParamChecksum param_checksum(const std::vector<torch::Tensor>& tensors);

// A diagnostic (CASESTUDY_PARAM_DUMP=DIR: Trainer::checksum writes the
// parameters it checksums to DIR/rank<R>.bin): the tensors' values as float32
// with their shapes, for a test to compare two runs element by element
// (engine/binding/tp_zero_diag_test.go). Throws std::runtime_error when the
// file cannot be written.
void write_param_dump(const std::string& path, const std::vector<torch::Tensor>& tensors);

}  // namespace cs
