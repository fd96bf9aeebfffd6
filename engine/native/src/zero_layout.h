// zero_layout.h: the flat buffer's layout that ZeRO (zero.cpp) and ZeRO-2's
// reducer (zero_reducer.cpp) share; private to the two.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "dist.h"

namespace cs {

struct ZeroLayout {
  struct Bucket {
    int64_t offset = 0, numel = 0, padded = 0, block = 0;  // block = padded / world
    std::vector<size_t> params;                             // indices into params
  };
  int world = 1, rank = 0;
  torch::Tensor flat;
  std::vector<torch::Tensor> params;
  std::vector<int64_t> at;  // each parameter's offset in flat
  std::vector<size_t> bucket_of;
  std::vector<Bucket> buckets;

  int64_t block_begin(const Bucket& b) const { return b.offset + rank * b.block; }
};

// A tensor over flat's storage from element offset, laid out as like: like's
// strides where like is dense (channels_last stays channels_last), else row-major.
torch::Tensor view_as_in(const torch::Tensor& flat, int64_t offset, const torch::Tensor& like);

// ZeRO-2's reducer (zero_reducer.cpp): reduce-scatters each micro-batch's
// buckets into shard (the rank's block of each bucket, L's order).
std::unique_ptr<GradReducer> make_scatter_reducer(std::shared_ptr<ZeroLayout> L, std::vector<torch::Tensor> shard,
                                                  Communicator& comm, const DDPOptions& o);

}  // namespace cs
