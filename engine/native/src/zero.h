// zero.h: ZeRO-1 and ZeRO-2 (Rajbhandari et al., arXiv 1910.02054; PyTorch's
// ZeroRedundancyOptimizer, DeepSpeed stages 1 and 2): the optimizer states, and
// with stage 2 the reduced gradients, sharded across the data-parallel ranks.
//
// Layout. The trainable parameters (all fp32 on one device) become views of one
// flat buffer, bucket after bucket: the buckets are DDP's (reverse registration
// order, the first capped at ddp.first_bucket_mb, the rest at ddp.bucket_mb),
// each parameter padded to a multiple of 64 elements and each bucket to a
// multiple of 64 x the world size (zero.cpp kAlign). Rank r owns block r of
// every bucket (as FSDP shards each flat parameter), so each bucket's
// reduce-scatter and all-gather are one equal-count collective. The optimizer
// runs on the rank's blocks only, cut at parameter boundaries into pieces that
// keep each parameter's weight-decay group: its states are 1/world of DDP's.
//
// Stage 1: the DDP reducer (make_reducer: bucketed all-reduce, overlapped with
// backward) leaves the averaged gradients on every rank; each rank clips by the
// norm of those full gradients, computed exactly as DDP does (no collective:
// every rank holds the same averaged gradients), steps its pieces, and a
// bucketed all-gather brings every rank's updated block back into the flat
// buffer. Same all-reduce, same clip coefficient, same per-element update: the
// parameters are bit-identical to DDP's (engine/binding/zero_test.go).
//
// Stage 2: a reducer of its own (make_reducer) copies each bucket's gradients
// into a padded bucket buffer as the bucket becomes ready in backward, frees the
// parameters' .grad(), and reduce-scatters the bucket: only the rank's block of
// the averaged gradient stays. The clip norm is one float64 all-reduce of the
// blocks' sums of squares (grad_sumsq, as the pipeline's clip), which also
// carries fp16's found_inf: a non-finite block makes the sum non-finite on every
// rank, as an all-reduce with max would. Within float32 reduction-order noise
// of DDP (the norm of a parameter's pieces is not bitwise its whole norm).
//
// With tensor parallelism (tp.h) ZeRO shards over the rank's data group, not
// the world: comm is group_communicator(data group), every tensor rank keeps
// its own flat buffer of its (tensor-sharded or replicated) parameters, and
// the data group's ranks of one tensor rank hold equal shapes, so the layout is
// the same on all of them. The clip norm (ZeroTensorParallel) sums the
// tensor-sharded parameters' squares over the tensor group too and counts the
// replicated ones once (tensor_parallel_sumsq, as the trainer's tp clip).
// The trainer sums the sequence-parallel gradients over the tensor group
// before the reducer's finalize and runs the buckets with ddp.overlap off:
// the group's collectives are synchronous (pipeline_group.h), so in backward
// hooks they would stall the backward, not overlap it.
//
// Not done: the all-gather runs after the step, exposed (no overlap with the next
// forward); gradient compression with stage 2; ZeRO under a pipeline; overlap
// of the data group's buckets with the backward under tensor parallelism.
#pragma once

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "config.h"
#include "device.h"
#include "dist.h"
#include "optim.h"

namespace cs {

// Refuses (UnsupportedError) what ZeRO does not support: zero.stage > 0
// without data parallel (dist.world_size > 1 or dist.backend set), with a
// pipeline, or stage 2 with ddp.compression.
void check_zero(const EngineConfig& cfg);

class PipeGroup;    // pipeline_group.h
struct ZeroLayout;  // zero.cpp

// A Communicator over a PipeGroup (tensor parallelism's data group), for
// ZeroOptimizer and the DDP reducer it drives. The group's collectives are
// synchronous: each returns its work done, timed on the device's timeline
// (elapsed_ms). broadcast is an all-gather of every rank's tensor (exact:
// bytes copied), barrier a one-element all-reduce, send and recv an
// exchange. g must outlive it; backend and version are the world's.
std::unique_ptr<Communicator> group_communicator(PipeGroup& g, torch::Device device,
                                                 std::string backend, std::string version);

// ZeRO under tensor parallelism: the rank's tensor group and, per entry of
// the optimizer's params, whether it is tensor-sharded (TensorParallelModel).
struct ZeroTensorParallel {
  PipeGroup* tensor = nullptr;
  std::vector<bool> sharded;
};

class ZeroOptimizer {
 public:
  // params: the trainable parameters in registration order (rebound here as
  // views of the flat buffer); decays[i]: params[i] takes weight decay. comm
  // must outlive this object. The parameters must already be equal on every rank.
  // tp (may be null; its group must outlive this object): tensor parallelism,
  // comm then the data group's.
  ZeroOptimizer(const std::vector<torch::Tensor>& params, const std::vector<bool>& decays,
                Communicator& comm, const ZeroOptions& z, const DDPOptions& ddp,
                const OptimOptions& o, const ZeroTensorParallel* tp = nullptr);
  ~ZeroOptimizer();
  // The gradient reducer the trainer drives (prepare/finalize): DDP's for stage
  // 1, the reduce-scatter reducer for stage 2. Call once.
  std::unique_ptr<GradReducer> make_reducer();
  // After the reducer's finalize(): clip (inv_scale: 1 / loss scale, or
  // undefined), step the rank's pieces (skipped on found_inf when can_skip),
  // all-gather the updated blocks.
  ClipResult step(const torch::Tensor& inv_scale, double max_norm, bool can_skip);
  // Adds the step's all-gathers (and stage 2's norm all-reduce) to the step's
  // comm metrics and buckets; the step's device work must be done. totals
  // false: to the buckets only (tensor parallelism: the data group's timer
  // has counted them in the totals already).
  void add_metrics(nlohmann::json& m, bool totals = true) const;
  nlohmann::json info() const;
  std::string implementation() const;
  int64_t state_bytes() const;  // optimizer states of this rank's pieces

 private:
  struct Piece {
    size_t param, bucket;
    int64_t begin, len;  // in the flat buffer
  };
  std::vector<torch::Tensor> piece_grads();  // this step's, bound as the pieces' .grad()

  std::shared_ptr<ZeroLayout> layout_;
  Communicator& comm_;
  ZeroOptions z_;
  DDPOptions ddp_;
  std::vector<Piece> pieces_;
  std::vector<torch::Tensor> piece_params_;  // views of the flat buffer, one per piece
  std::vector<torch::Tensor> shard_grads_;   // stage 2: the rank's block of each bucket
  bool tp_ = false;                          // tensor parallelism (ZeroTensorParallel)
  PipeGroup* tensor_ = nullptr;
  std::vector<bool> sharded_;                // per layout parameter: tensor-sharded
  std::unique_ptr<Optimizer> optim_;
  // The last step's collectives, read by add_metrics.
  std::vector<std::shared_ptr<CommWork>> gathers_;
  std::vector<int64_t> gather_bytes_;
  std::shared_ptr<CommWork> norm_work_;
  std::unique_ptr<Timeline> clock_;  // marks 0, 1: the all-gather's wait
};

}  // namespace cs
