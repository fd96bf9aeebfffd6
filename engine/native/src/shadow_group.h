// shadow_group.h: the stretch calibration's Gloo group (shadow_gloo.cpp,
// CASESTUDY_INTERFERE=gloo:N): N ranks in this process, rank 0 the trainer's,
// ranks 1..N-1 helpers that contribute zeros. Each rank has its own GlooGroup
// (gloo_group.h) on the loopback and its own communication thread (a
// HostQueue, as a rank's GlooCommunicator has), so rank 0's thread sends,
// receives and reduces its share of every collective as a rank of an N-rank
// run does, while the helpers compute nothing.
#pragma once
#ifdef CS_WITH_GLOO

#include <torch/torch.h>

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "dist.h"

namespace cs {

class GlooGroup;
class HostQueue;

class ShadowGroup {
 public:
  explicit ShadowGroup(int ranks);
  ~ShadowGroup();
  ShadowGroup(const ShadowGroup&) = delete;
  ShadowGroup& operator=(const ShadowGroup&) = delete;

  int ranks() const { return ranks_; }

  // t (CPU) summed over the group in place: rank 0 gives t, every helper
  // zeros, so t is unchanged (bf16 travels as fp32).
  std::shared_ptr<CommWork> all_reduce(torch::Tensor t);
  // in (CPU, not bf16) gathered over the group: rank 0's block is in, every
  // helper's zeros. out holds in's elements (the world of one's gather: in
  // itself) or ranks() x in's (the group's whole gather).
  std::shared_ptr<CommWork> all_gather(torch::Tensor in, torch::Tensor out);

 private:
  // Helper r's zeros: n elements of type (one buffer per size and type: its
  // queue runs one collective at a time).
  torch::Tensor zeros(int r, int64_t n, torch::ScalarType type);

  const int ranks_;
  std::vector<std::shared_ptr<GlooGroup>> groups_;
  std::vector<std::map<std::pair<int64_t, int>, torch::Tensor>> zeros_;  // per helper
  std::vector<std::unique_ptr<HostQueue>> queues_;                     // last: joined before groups_
};

}  // namespace cs

#endif  // CS_WITH_GLOO
