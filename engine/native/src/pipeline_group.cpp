// pipeline_group.cpp: picks the backend of the pipeline's groups (pipeline_group.h).
#include "pipeline_group.h"

#include "model.h"

namespace cs {

// comm_staged.cpp: wraps each group so its tensors are staged through host
// buffers (the groups of a "gloo-staged" world).
std::vector<std::unique_ptr<PipeGroup>> stage_pipe_groups(std::vector<std::unique_ptr<PipeGroup>> groups,
                                                          torch::Device device);

std::vector<std::unique_ptr<PipeGroup>> make_pipe_groups(const DistOptions& dist,
                                                         torch::Device device,
                                                         Communicator& world,
                                                         const std::vector<Partition>& parts) {
  for (const auto& p : parts) {
    int covered = 0;
    for (const auto& g : p) covered += int(g.size());
    if (covered != dist.world_size)
      throw std::logic_error("pipeline groups: a partition covers " + std::to_string(covered) +
                             " of " + std::to_string(dist.world_size) + " ranks");
  }
  const std::string backend = world.backend();
#ifdef CS_WITH_GLOO
  if (backend == "gloo") return make_gloo_pipe_groups(dist, parts);
  if (backend == "gloo-staged") return stage_pipe_groups(make_gloo_pipe_groups(dist, parts), device);
#endif
#ifdef CS_WITH_NCCL
  if (backend == "nccl") return make_nccl_pipe_groups(dist, device, world, parts);
#endif
  throw UnsupportedError("pipeline parallelism over " + backend +
                         ": this engine build has no point-to-point groups for that backend");
}

}  // namespace cs
