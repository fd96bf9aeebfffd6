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

}  // namespace cuda
}  // namespace cs
