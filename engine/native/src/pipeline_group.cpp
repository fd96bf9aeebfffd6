// pipeline_group.cpp: picks the backend of the pipeline's groups, and the
// coalesced reductions over a group (pipeline_group.h).
#include "pipeline_group.h"

#include <algorithm>

#include "model.h"

namespace cs {

// comm_staged.cpp: wraps each group so its tensors are staged through host
// buffers (the groups of a "gloo-staged" world).
std::vector<std::unique_ptr<PipeGroup>> stage_pipe_groups(std::vector<std::unique_ptr<PipeGroup>> groups,
                                                          torch::Device device);

namespace {

// The tensors as one flat buffer (their promoted dtype), and back.
torch::Tensor flatten(const std::vector<torch::Tensor>& ts) {
  std::vector<torch::Tensor> parts;
  parts.reserve(ts.size());
  for (const auto& t : ts) parts.push_back(t.reshape({-1}));
  return torch::cat(parts);
}

void unflatten(const torch::Tensor& flat, const std::vector<torch::Tensor>& ts) {
  int64_t off = 0;
  for (const auto& t : ts) {
    t.copy_(flat.narrow(0, off, t.numel()).view_as(t));
    off += t.numel();
  }
}

}  // namespace

int64_t average_over_group(const std::vector<torch::Tensor>& grads, PipeGroup& g,
                           const std::function<void()>& before, const std::function<void()>& after) {
  if (grads.empty()) return 0;
  torch::NoGradGuard ng;
  auto flat = flatten(grads);
  if (before) before();
  g.all_reduce_sum(flat);
  if (after) after();
  flat.div_(double(g.size()));
  unflatten(flat, grads);
  return flat.numel() * int64_t(flat.element_size());
}

int coalesced_all_reduce_sum(const std::vector<torch::Tensor>& ts, PipeGroup& g) {
  torch::NoGradGuard ng;
  std::vector<torch::ScalarType> dtypes;
  for (const auto& t : ts)
    if (std::find(dtypes.begin(), dtypes.end(), t.scalar_type()) == dtypes.end())
      dtypes.push_back(t.scalar_type());
  for (const auto dt : dtypes) {
    std::vector<torch::Tensor> mine;
    for (const auto& t : ts)
      if (t.scalar_type() == dt) mine.push_back(t);
    auto flat = flatten(mine);
    g.all_reduce_sum(flat);
    unflatten(flat, mine);
  }
  return int(dtypes.size());
}

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
