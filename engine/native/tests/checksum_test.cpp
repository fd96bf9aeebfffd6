// checksum_test.cpp: param_checksum (src/checksum.h) against a scalar loop of
// its definition on the host, on the CPU and (where there is one) the GPU:
// the same hash bits on every device, for float32, bfloat16, float16 and
// float64 tensors, channels_last ones, sizes around the chunk length; and
// that it notices what it is for: one changed bit, two swapped elements, two
// swapped tensors, -0.0 against +0.0.
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cstring>
#include <iostream>
#include <vector>

#include "checksum.h"
#include "native_test.h"

using namespace cs;

namespace {

// The definition in checksum.h, one element at a time.
ParamChecksum reference(const std::vector<torch::Tensor>& tensors) {
  ParamChecksum r;
  for (const auto& t0 : tensors) {
    auto t = t0.detach().cpu().contiguous();
    const auto* bytes = static_cast<const unsigned char*>(t.data_ptr());
    const int64_t n = t.numel(), size = int64_t(t.element_size());
    uint64_t h = 0;
    for (int64_t c = 0; c * kChecksumChunk < n || (c == 0 && n == 0); c++) {
      uint64_t inner = 0;
      for (int64_t j = c * kChecksumChunk; j < std::min(n, (c + 1) * kChecksumChunk); j++) {
        int64_t w = 0;
        switch (size) {  // the element's bits as a signed integer of its width
          case 1: { int8_t v; std::memcpy(&v, bytes + j, 1); w = v; break; }
          case 2: { int16_t v; std::memcpy(&v, bytes + 2 * j, 2); w = v; break; }
          case 4: { int32_t v; std::memcpy(&v, bytes + 4 * j, 4); w = v; break; }
          default: std::memcpy(&w, bytes + 8 * j, 8);
        }
        inner += uint64_t(w) * checksum_key(j % kChecksumChunk);
      }
      h += inner * checksum_chunk_multiplier(c);
    }
    r.hash = (r.hash ^ h) * kFnvPrime;
    r.hash = (r.hash ^ uint64_t(n)) * kFnvPrime;
    r.sum += t.to(torch::kFloat64).sum().item<double>();
  }
  return r;
}

int device_tests(torch::Device dev) {
  auto gen = at::detail::createCPUGenerator(5);
  std::vector<torch::Tensor> ts;
  for (int64_t n : {int64_t(1), int64_t(3), kChecksumChunk - 1, kChecksumChunk, kChecksumChunk + 1,
                    3 * kChecksumChunk + 17})
    ts.push_back(torch::randn({n}, gen));
  ts.push_back(torch::randn({64, 3, 7, 7}, gen).contiguous(at::MemoryFormat::ChannelsLast));
  ts.push_back(torch::randn({1000}, gen).to(torch::kBFloat16));
  ts.push_back(torch::randn({777}, gen).to(torch::kFloat16));
  ts.push_back(torch::randn({99}, gen).to(torch::kFloat64));
  ts.push_back(-torch::rand({2 * kChecksumChunk}, gen));  // negative words: sign extension
  std::vector<torch::Tensor> on;
  for (const auto& t : ts) on.push_back(t.to(dev));
  const ParamChecksum ref = reference(ts), got = param_checksum(on);
  CS_CHECK(got.hash == ref.hash);
  CS_CHECK(std::abs(got.sum - ref.sum) <= 1e-9 * (1 + std::abs(ref.sum)));
  CS_CHECK(got.hex().size() == 16);
  // The same tensors again give the same bits; the parameters are not touched.
  auto copy = on[3].clone();
  CS_CHECK(param_checksum(on).hash == got.hash);
  CS_CHECK(param_checksum(on).sum == got.sum);
  CS_CHECK(torch::equal(on[3], copy));
  // What it must notice.
  auto changed = [&](std::vector<torch::Tensor> v) { return param_checksum(v).hash != got.hash; };
  {
    auto v = on;
    auto bits = v[4].clone().view(torch::kInt32);
    bits[12345].add_(1);  // one bit, the lowest of one element
    v[4] = bits.view(torch::kFloat32);
    CS_CHECK(changed(v));
  }
  {
    auto v = on;
    auto t = v[5].clone();
    auto a = t[7].clone();
    t[7] = t[kChecksumChunk + 7];  // the same key in two chunks
    t[kChecksumChunk + 7] = a;
    v[5] = t;
    CS_CHECK(changed(v));
    t = on[5].clone();
    a = t[1].clone();
    t[1] = t[2];
    t[2] = a;
    v[5] = t;
    CS_CHECK(changed(v));
  }
  {
    auto v = on;
    std::swap(v[1], v[2]);
    CS_CHECK(changed(v));
    v = on;
    v[7] = v[7].clone();
    v[7].view(torch::kInt16)[3].add_(1);  // a bfloat16 bit
    CS_CHECK(changed(v));
  }
  {
    auto z = torch::zeros({5}, torch::TensorOptions().device(dev));
    auto nz = -z;
    CS_CHECK(param_checksum({z}).hash != param_checksum({nz}).hash);
    CS_CHECK(param_checksum({z}).sum == 0);
  }
  std::cout << "checksum ok (" << dev << ", hash " << got.hex() << ")\n";
  return 0;
}

}  // namespace

int checksum_tests() {
  if (device_tests(torch::Device(torch::kCPU))) return 1;
  if (torch::cuda::is_available() && device_tests(torch::Device(torch::kCUDA))) return 1;
  return 0;
}
