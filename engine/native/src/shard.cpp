// shard.cpp: data parallel input with DistributedSampler semantics (dist.h shard_data).
#include "dist.h"
#include "model.h"

namespace cs {
namespace {

class ShardedData : public DataSource {
 public:
  ShardedData(std::unique_ptr<DataSource> global, int64_t rank, int64_t world)
      : global_(std::move(global)), rank_(rank), world_(world) {}

  Batch next() override {
    Batch g = global_->next();
    Batch b;
    b.input = slice(g.input);
    b.target = slice(g.target);
    b.aux = slice(g.aux);
    b.aux_target = slice(g.aux_target);
    return b;
  }

 private:
  torch::Tensor slice(const torch::Tensor& t) const {
    if (!t.defined()) return t;
    int64_t n = t.size(0);
    if (n % world_ != 0) {
      throw std::logic_error("shard_data: a global batch of " + std::to_string(n) +
                             " rows does not split over " + std::to_string(world_) + " ranks");
    }
    int64_t b = n / world_;
    // contiguous(): the slice owns its memory (and keeps channels_last images so).
    return t.narrow(0, rank_ * b, b).contiguous(t.suggest_memory_format());
  }

  std::unique_ptr<DataSource> global_;
  int64_t rank_, world_;
};

}  // namespace

std::unique_ptr<DataSource> shard_data(std::unique_ptr<DataSource> global, int64_t rank,
                                       int64_t world_size) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw std::logic_error("shard_data: rank " + std::to_string(rank) + " outside world_size " +
                           std::to_string(world_size));
  }
  return std::make_unique<ShardedData>(std::move(global), rank, world_size);
}

}  // namespace cs
