// checksum.cpp: see checksum.h.
#include "checksum.h"

#include <cstdio>
#include <map>
#include <stdexcept>

namespace cs {
namespace {

torch::ScalarType word_type(const torch::Tensor& t) {
  switch (t.element_size()) {
    case 1: return torch::kInt8;
    case 2: return torch::kInt16;
    case 4: return torch::kInt32;
    case 8: return torch::kInt64;
  }
  throw std::invalid_argument("checksum: elements of " + std::to_string(t.element_size()) +
                              " bytes (" + std::string(c10::toString(t.scalar_type())) + ")");
}

// The keys k(0..kChecksumChunk-1) and the chunk multipliers m(0..chunks-1) on
// one device, as int64 (the same bits as the uint64 values).
struct Tables {
  torch::Tensor keys, multipliers;
};

Tables tables(const torch::Device& device, int64_t chunks) {
  auto i64 = torch::TensorOptions().dtype(torch::kInt64);
  auto keys = torch::empty({kChecksumChunk}, i64);
  auto* k = keys.data_ptr<int64_t>();
  for (int64_t i = 0; i < kChecksumChunk; i++) k[i] = int64_t(checksum_key(i));
  auto mult = torch::empty({chunks}, i64);
  auto* m = mult.data_ptr<int64_t>();
  for (int64_t c = 0; c < chunks; c++) m[c] = int64_t(checksum_chunk_multiplier(c));
  return {keys.to(device), mult.to(device)};
}

// One tensor's h (checksum.h) as a 0-d int64 tensor on its device: the words,
// times their keys, summed per chunk, times the chunk multipliers, summed.
torch::Tensor tensor_hash(const torch::Tensor& t, const Tables& tb) {
  const int64_t n = t.numel();
  auto w = t.detach().contiguous().reshape({-1}).view(word_type(t));
  // A fresh int64 copy, multiplied in place (never the parameter's storage).
  w = w.to(torch::kInt64, /*non_blocking=*/false, /*copy=*/true);
  const int64_t chunks = n / kChecksumChunk, tail = n % kChecksumChunk;
  auto h = torch::zeros({}, w.options());
  if (chunks > 0) {
    auto body = w.narrow(0, 0, chunks * kChecksumChunk).view({chunks, kChecksumChunk});
    body.mul_(tb.keys);
    h.add_(body.sum(1).mul_(tb.multipliers.narrow(0, 0, chunks)).sum());
  }
  if (tail > 0) {
    auto rest = w.narrow(0, chunks * kChecksumChunk, tail);
    rest.mul_(tb.keys.narrow(0, 0, tail));
    h.add_(rest.sum().mul_(tb.multipliers.narrow(0, chunks, 1).squeeze(0)));
  }
  return h;
}

}  // namespace

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

std::string ParamChecksum::hex() const {
  char s[17];
  std::snprintf(s, sizeof s, "%016llx", static_cast<unsigned long long>(hash));
  return s;
}

ParamChecksum param_checksum(const std::vector<torch::Tensor>& tensors) {
  torch::NoGradGuard ng;
  // The tables per device, long enough for the largest tensor's chunks (+1 for its tail).
  std::map<std::string, int64_t> chunks;
  for (const auto& t : tensors) {
    auto& c = chunks[t.device().str()];
    c = std::max(c, t.numel() / kChecksumChunk + 1);
  }
  std::map<std::string, Tables> tb;
  for (const auto& [dev, c] : chunks) tb[dev] = tables(torch::Device(dev), c);
  // Per tensor its hash and float64 sum, left on its device; then copied to
  // the host together (one copy each when every tensor is on one device).
  std::vector<torch::Tensor> hashes, sums;
  bool one_device = true;
  for (const auto& t : tensors) {
    hashes.push_back(tensor_hash(t, tb.at(t.device().str())));
    sums.push_back(t.detach().sum(torch::kFloat64));
    one_device = one_device && t.device() == tensors[0].device();
  }
  if (one_device && !tensors.empty()) {
    auto h = torch::stack(hashes).cpu(), s = torch::stack(sums).cpu();
    for (size_t i = 0; i < tensors.size(); i++) hashes[i] = h[int64_t(i)], sums[i] = s[int64_t(i)];
  }
  ParamChecksum r;
  for (size_t i = 0; i < tensors.size(); i++) {
    r.hash = (r.hash ^ uint64_t(hashes[i].item<int64_t>())) * kFnvPrime;
    r.hash = (r.hash ^ uint64_t(tensors[i].numel())) * kFnvPrime;
    r.sum += sums[i].item<double>();
  }
  return r;
}

}  // namespace cs

namespace cs {

// CASESTUDY_PARAM_DUMP (checksum.h): "CSPD1\n", the tensor count (uint64),
// then per tensor its dimensions (uint64 count, int64 each) and its elements
// as little-endian float32, row-major.
void write_param_dump(const std::string& path, const std::vector<torch::Tensor>& tensors) {
  torch::NoGradGuard ng;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) throw std::runtime_error("CASESTUDY_PARAM_DUMP: cannot write " + path);
  bool ok = std::fwrite("CSPD1\n", 1, 6, f) == 6;
  auto u64 = [&](uint64_t v) { ok = ok && std::fwrite(&v, sizeof v, 1, f) == 1; };
  u64(tensors.size());
  for (const auto& t : tensors) {
    u64(uint64_t(t.dim()));
    for (int64_t d : t.sizes()) u64(uint64_t(d));
    const torch::Tensor h = t.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    const size_t n = size_t(h.numel());
    ok = ok && (n == 0 || std::fwrite(h.data_ptr<float>(), sizeof(float), n, f) == n);
  }
  ok = std::fclose(f) == 0 && ok;
  if (!ok) throw std::runtime_error("CASESTUDY_PARAM_DUMP: writing " + path + " failed");
}

}  // namespace cs
