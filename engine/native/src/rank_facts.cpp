// rank_facts.cpp: see rank_facts.h.
#include "rank_facts.h"

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#ifdef CS_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime_api.h>
#endif

namespace cs {

int affinity_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return int(std::max(1u, std::thread::hardware_concurrency()));
}

nlohmann::json gpu_identity(const torch::Device& d) {
  nlohmann::json j = nlohmann::json::object();
#ifdef CS_WITH_CUDA
  if (!d.is_cuda()) return j;
  const int index = d.index() < 0 ? 0 : d.index();
  const cudaDeviceProp* p = at::cuda::getDeviceProperties(index);
  const auto* u = reinterpret_cast<const unsigned char*>(p->uuid.bytes);
  char uuid[64];
  std::snprintf(uuid, sizeof uuid,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
                u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
  j["gpu_uuid"] = uuid;
  char bus[32] = {0};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, index) == cudaSuccess) j["pci_bus_id"] = bus;
#else
  (void)d;
#endif
  return j;
}

}  // namespace cs
