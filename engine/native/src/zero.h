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
// the averaged gradient stays. With grad_accum > 1 it does so in every
// micro-batch's backward, a later micro-batch adding the running sum into the
// rank's own block first (GradReducer::end_micro_batch, dist.h), so between
// micro-batches a rank holds its shard, not the gradients; the sum's order
// then differs from DDP's (docs/zero.md bounds it). The clip norm is one float64 all-reduce of the
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
// The all-gather overlaps the next forward (zero.overlap_gather, the default):
// step() issues every bucket's all-gather asynchronously, in the order the
// forward first reads the buckets (set_forward_order: the model's layers, so
// the last bucket, the first layers', first), and returns. The trainer runs the
// forward layer range by layer range (Model::forward_layers, as a pipeline
// stage does), calling wait_layer(l) before the first layer that reads a bucket
// not yet waited for: on the CPU the host waits for the HostQueue's work, on a
// GPU the compute stream waits on the bucket's event (NCCL: cudaStreamWaitEvent
// through CommWork::wait; no host sync). Whatever reads the parameters outside
// the forward (the next step, the checksum, close) calls drain() first. Under
// tensor parallelism the data group's collectives block the host, so its
// all-gathers run on a HostQueue thread of group_communicator (on a GPU on a
// stream of their own), and wait() blocks the host until the bucket is there:
// the forward's kernels queued before still overlap it. ZeRO is refused with
// CUDA graphs (data parallel is), so nothing here is captured.
//
// Records: a step's buckets and comm_ms carry the all-gathers its forward
// waited for (with overlap, the previous step's: the first step has none, the
// last step's are drained unrecorded), and gather_wait_ms how long the forward
// (overlap) or the step (overlap off) waited for them, also in exposed_comm_ms.
//
// Not done: gradient compression with stage 2; ZeRO under a pipeline; overlap
// of the data group's buckets with the backward under tensor parallelism; the
// overlap under tensor parallelism over NCCL groups (GPUs, not the rehearsal's
// host-staged groups): there the all-gathers stay in the step, exposed, since a
// thread's collectives on the data group beside the forward's on the tensor
// group could deadlock NCCL (trainer.cpp's connect says why).
#pragma once

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "config.h"
#include "device.h"
#include "dist.h"
#include "model.h"
#include "optim.h"

namespace cs {

// Refuses (UnsupportedError) what ZeRO does not support: zero.stage > 0
// without data parallel (dist.world_size > 1 or dist.backend set), with a
// pipeline, or stage 2 with ddp.compression.
void check_zero(const EngineConfig& cfg);

class PipeGroup;    // pipeline_group.h
struct ZeroLayout;  // zero_layout.h

// A Communicator over a PipeGroup (tensor parallelism's data group), for
// ZeroOptimizer and the DDP reducer it drives. The group's collectives are
// synchronous: each returns its work done, timed on the device's timeline
// (elapsed_ms). broadcast is an all-gather of every rank's tensor (exact:
// bytes copied), barrier a one-element all-reduce, send and recv an
// exchange. g must outlive it; backend and version are the world's.
// async (may be null): the same group without its timer (TimedGroup::inner):
// all_gather then runs on it on a thread of the communicator (on a GPU on a
// stream of its own, after the work queued on the caller's stream) and returns
// at once; its work's wait() blocks the host until done. ZeroOptimizer with
// zero.overlap_gather.
std::unique_ptr<Communicator> group_communicator(PipeGroup& g, torch::Device device,
                                                 std::string backend, std::string version,
                                                 PipeGroup* async = nullptr);

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
  // all-gather the updated blocks (overlap_gather: issued, not waited for).
  ClipResult step(const torch::Tensor& inv_scale, double max_norm, bool can_skip);

  // zero.overlap_gather: the forward's layers in order, each the parameters it
  // reads (Model::layer_parameters), then the loss's (Model::loss_parameters).
  // Orders the all-gathers by first use; the trainer calls it once.
  void set_forward_order(const std::vector<std::vector<torch::Tensor>>& layers);
  bool overlapping() const { return z_.overlap_gather && !wait_points_.empty(); }
  // The layers before which the forward must wait (ascending, 0 first): each
  // the first to read a bucket that no earlier layer reads.
  const std::vector<int64_t>& wait_points() const { return wait_points_; }
  // Before layer l of the forward (l = the number of layers: before the loss;
  // layer 0 also for any bucket that neither a layer nor the loss reads):
  // waits for the gathers of the buckets first read there, timed as the
  // forward's gather wait.
  void wait_layer(int64_t l);
  // Waits for every all-gather still outstanding (untimed): before anything
  // outside the forward reads the parameters. Cheap when none is.
  void drain();

  // Adds the all-gathers the step waited for (see the header comment) and
  // stage 2's norm all-reduce to the step's buckets and comm metrics, and
  // gather_wait_ms; the step's device work must be done. totals false (tensor
  // parallelism; call after the tp totals are set): the norm only to the
  // buckets (the data group's timer counted it, and the all-gathers without
  // overlap), the overlapped all-gathers' wait taken out of forward_ms as the
  // tp collectives are.
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
  // One step's all-gathers, bucket by bucket (index: the bucket), and the
  // forward's waits for them (a pair of marks per wait point on clock).
  struct Round {
    std::vector<std::shared_ptr<CommWork>> works;
    std::vector<int64_t> bytes;
    std::vector<torch::Tensor> sends;  // the rank's blocks, alive until waited for
    std::vector<bool> waited;
    std::unique_ptr<Timeline> clock;
    std::vector<int> pairs;  // the marked pairs (2k, 2k + 1)
    bool sync = false;       // waited in the step (overlap off): clock_ timed it
    void reset(size_t buckets);
  };
  void issue_gathers(Round& r);
  void wait_bucket(Round& r, size_t b);

  std::vector<size_t> order_;                // the all-gathers' issue order
  std::vector<int64_t> wait_points_;         // set_forward_order
  std::vector<std::vector<size_t>> first_;   // per layer (and the loss): buckets first read there
  Round round_;  // in flight (overlap) until the forward waits for it
  Round last_;   // the one this step waited for: add_metrics reads it
  std::shared_ptr<CommWork> norm_work_;
  std::unique_ptr<Timeline> clock_;  // marks 0, 1: the all-gather's wait (overlap off)
};

// zero.overlap_gather's forward (the trainer's, when zero.overlapping()): the
// model's layers in the ranges between zero's wait points, each range after
// its wait_layer, and the loss after wait_layer(num_layers). The same layers
// as Model::forward_loss, split where a pipeline stage may be.
torch::Tensor forward_loss_waiting(Model& model, ZeroOptimizer& zero, const Batch& b);

}  // namespace cs
