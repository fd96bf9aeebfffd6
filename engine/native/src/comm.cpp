// comm.cpp: picks the communicator backend (dist.h make_communicator); without
// NCCL, nccl_unique_id_hex says so (comm_nccl.cpp defines it otherwise).
#include "comm_internal.h"
#include "model.h"

namespace cs {

std::unique_ptr<Communicator> make_communicator(const DistOptions& opts, torch::Device device) {
  if (opts.world_size < 1 || opts.rank < 0 || opts.rank >= opts.world_size) {
    throw ConfigError("dist: rank " + std::to_string(opts.rank) + " is outside world_size " +
                      std::to_string(opts.world_size));
  }
  if (opts.timeout_ms <= 0) {
    throw ConfigError("dist.timeout_ms must be positive, got " + std::to_string(opts.timeout_ms));
  }
  std::string backend = opts.backend;
  if (backend.empty()) backend = device.is_cuda() ? "nccl" : "gloo";
  if (backend == "gloo" || backend == "gloo-staged") {
#ifdef CS_WITH_GLOO
    // CUDA tensors go through host buffers (ranks sharing a GPU: a rehearsal,
    // docs/rehearsal.md); gloo-staged runs that path with CPU tensors too.
    if (device.is_cuda() || backend == "gloo-staged")
      return make_staged_communicator(make_gloo_communicator(opts), device, opts.timeout_ms);
    return make_gloo_communicator(opts);
#else
    throw UnsupportedError("dist.backend gloo: this engine was built without Gloo (CS_WITH_GLOO)");
#endif
  }
  if (backend == "nccl") {
    if (!device.is_cuda()) {
      throw UnsupportedError("dist.backend nccl needs device cuda; CPU ranks use gloo");
    }
#ifdef CS_WITH_NCCL
    return make_nccl_communicator(opts, device);
#else
    throw UnsupportedError("dist.backend nccl: this engine was built without NCCL (CS_WITH_NCCL)");
#endif
  }
  throw ConfigError("dist.backend must be nccl, gloo, gloo-staged or empty, got \"" + backend + "\"");
}

#ifndef CS_WITH_NCCL
std::string nccl_unique_id_hex() { throw UnsupportedError("this engine was built without NCCL"); }
#endif

}  // namespace cs
