// device.cu: device facts the launchers size their grids by.
#include "common.cuh"

namespace cs {
namespace cuda {
namespace {

// Attribute attr of the current device, read once per device (fallback where
// the device or the attribute cannot be read).
int cached_attribute(int (&cache)[64], cudaDeviceAttr attr, int fallback) {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return fallback;
  if (cache[dev] == 0) {
    int n = 0;
    if (cudaDeviceGetAttribute(&n, attr, dev) != cudaSuccess || n <= 0) n = fallback;
    cache[dev] = n;
  }
  return cache[dev];
}

}  // namespace

int sm_count() {
  static int counts[64] = {0};
  return cached_attribute(counts, cudaDevAttrMultiProcessorCount, 132);
}

int smem_per_block_optin() {
  static int bytes[64] = {0};
  return cached_attribute(bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, 48 * 1024);
}

int resident_per_sm(const void* kernel, int threads, size_t smem, std::atomic<uint64_t> (&cache)[64]) {
  // An entry packs threads (16 bits), smem (32) and the answer (16); 0 is none.
  const uint64_t key = uint64_t(threads) << 48 | uint64_t(smem) << 16;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) dev = 0;
  const uint64_t e = cache[dev].load(std::memory_order_relaxed);
  if (e != 0 && (e & ~uint64_t(0xffff)) == key) return int(e & 0xffff);
  int b = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, kernel, threads, smem) != cudaSuccess || b < 1) b = 1;
  if (b > 0xffff) b = 0xffff;
  cache[dev].store(key | uint64_t(b), std::memory_order_relaxed);
  return b;
}

}  // namespace cuda
}  // namespace cs
