// dist_fallback.cpp: weak definitions of the data-parallel entry points of
// dist.h, used when the build has no implementation for them (comm_gloo.cpp,
// comm_nccl.cpp, reducer.cpp not present or their backend not compiled in). A
// strong definition in any of those files replaces the one here at link time.
#include "dist.h"
#include "model.h"

namespace cs {

__attribute__((weak)) std::unique_ptr<Communicator> make_communicator(const DistOptions& opts,
                                                                      torch::Device device) {
  throw UnsupportedError("data parallel (dist.world_size " + std::to_string(opts.world_size) +
                         ") is not available in this engine build: no communicator for " +
                         (device.is_cuda() ? std::string("CUDA (NCCL)") : std::string("CPU (Gloo)")));
}

__attribute__((weak)) std::unique_ptr<GradReducer> make_reducer(const std::vector<torch::Tensor>&,
                                                                Communicator&, const DDPOptions&) {
  throw UnsupportedError("data parallel is not available in this engine build: no gradient reducer");
}

__attribute__((weak)) std::string nccl_unique_id_hex() {
  throw UnsupportedError("this engine was built without NCCL");
}

}  // namespace cs
