// tp.h: tensor parallelism (Megatron-LM, Shoeybi et al. 2019,
// https://arxiv.org/abs/1909.08053) and sequence parallelism (Korthikanti et
// al. 2022, https://arxiv.org/abs/2205.05198) as building blocks: the rank
// mesh and its groups, the four conjugate communication functions, column- and
// row-parallel linear layers, the vocabulary-parallel embedding and
// cross-entropy, and the per-tensor-rank dropout seeds. docs/tensor-parallel.md
// explains them; tests/tp_test.cpp checks each against the full computation on
// CPU Gloo ranks.
//
// A tensor-parallel group is a PipeGroup (pipeline_group.h): its all-reduce,
// all-gather and reduce-scatter are synchronous on the compute stream (NCCL:
// ncclAllReduce, ncclAllGather, ncclReduceScatter on the current stream, then
// a wait; Gloo: blocking), which is what the autograd functions need. The
// all-gather and reduce-scatter here are the group's dedicated collectives
// along dim 0 of a rank-major buffer, the blocks moved to dim around them
// (Debian's Gloo has no reduce-scatter: its groups run an all-reduce and keep
// their block, pipeline_group_gloo.cpp).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "pipeline_group.h"

namespace cs {
namespace tp {

// ---- the mesh ---------------------------------------------------------------
// Ranks are ordered tensor-fastest, then data, then pipeline (Megatron's
// "tp-dp-pp"), so a tensor group is tp consecutive ranks: GPUs of one node.
//   rank = tensor + tp * (data + dp * pipe),  dp = world / (tp * pp).
struct MeshCoords {
  int tensor = 0, data = 0, pipe = 0;
};

struct Mesh {
  int tp = 1, dp = 1, pp = 1;
  // Throws std::invalid_argument unless tp, pp ≥ 1 and tp * pp divides world.
  static Mesh of(int world, int tp, int pp);
  int world() const { return tp * dp * pp; }
  MeshCoords coords(int rank) const;
  int rank(const MeshCoords& c) const { return c.tensor + tp * (c.data + dp * c.pipe); }
  // The three partitions of the world, each group's ranks ascending:
  // [0] tensor groups (tp ranks each), [1] data groups (dp), [2] pipeline groups (pp).
  std::vector<Partition> partitions() const;
};

// This rank's tensor, data and pipeline groups (nullptr where a group has one
// rank), built like the pipeline's (pipeline_group.h: Gloo process groups over
// the trial's store; NCCL communicators split from the world's).
// Every rank of the trial calls it with the same mesh.
struct MeshGroups {
  std::unique_ptr<PipeGroup> tensor, data, pipe;
};
inline MeshGroups make_mesh_groups(const DistOptions& dist, torch::Device device,
                                   Communicator& world, const Mesh& mesh) {
  auto g = make_pipe_groups(dist, device, world, mesh.partitions());
  return {std::move(g[0]), std::move(g[1]), std::move(g[2])};
}

// What a parallel layer needs to know: its tensor group (nullptr: degree 1,
// every function below is then the plain computation) and whether activations
// outside the tensor-parallel regions are split along the sequence.
struct Context {
  PipeGroup* group = nullptr;
  bool sequence_parallel = false;
  int64_t seq_dim = 1;  // activations are [batch, sequence, hidden]
  int rank() const { return group ? group->rank() : 0; }
  int size() const { return group ? group->size() : 1; }
};

// ---- the conjugate functions (autograd) -----------------------------------
// Megatron's mappings.py. Each forward's backward is the other's forward.
torch::Tensor copy_to(const torch::Tensor& x, PipeGroup* g);      // identity | all-reduce
torch::Tensor reduce_from(const torch::Tensor& x, PipeGroup* g);  // all-reduce | identity
torch::Tensor scatter_to(const torch::Tensor& x, PipeGroup* g);   // split last dim | all-gather
torch::Tensor gather_from(const torch::Tensor& x, PipeGroup* g);  // all-gather last dim | split
// Sequence parallelism, along dim: entering a tensor-parallel region, the
// all-gather (backward: reduce-scatter); leaving it, the reduce-scatter
// (backward: all-gather); and the split of a replicated tensor (backward:
// all-gather) where the sequence-parallel part begins.
torch::Tensor gather_from_seq(const torch::Tensor& x, PipeGroup* g, int64_t dim);
torch::Tensor reduce_scatter_to_seq(const torch::Tensor& x, PipeGroup* g, int64_t dim);
torch::Tensor scatter_to_seq(const torch::Tensor& x, PipeGroup* g, int64_t dim);

// The plain collectives (no autograd), exposed for tests and the cross-entropy.
torch::Tensor all_gather(const torch::Tensor& x, PipeGroup& g, int64_t dim);
torch::Tensor reduce_scatter(const torch::Tensor& x, PipeGroup& g, int64_t dim);

// ---- layers -----------------------------------------------------------------
// Column-parallel: w is this rank's rows [out/tp, in] of the full weight, b
// (may be undefined) its [out/tp]; the output stays split along the last
// dimension. The input goes through copy_to (sequence parallel: gather_from_seq).
torch::Tensor column_parallel_linear(const torch::Tensor& x, const torch::Tensor& w,
                                     const torch::Tensor& b, const Context& c);
// Row-parallel: x is split along its last dimension, w is this rank's columns
// [out, in/tp]; the partial products are summed by reduce_from (sequence
// parallel: reduce_scatter_to_seq), and the full bias b [out] is added after
// the reduce. Under sequence parallelism b's gradient covers only this rank's
// sequence shard: sum it with allreduce_sequence_parallel_grads.
torch::Tensor row_parallel_linear(const torch::Tensor& x, const torch::Tensor& w,
                                  const torch::Tensor& b, const Context& c);
// The vocabulary-parallel embedding: w is rows [rank*V/tp, (rank+1)*V/tp) of
// the [V, d] table; ids outside them give zero rows, and the ranks' rows are
// summed (sequence parallel: reduce-scattered along the sequence).
torch::Tensor vocab_parallel_embedding(const torch::Tensor& ids, const torch::Tensor& w,
                                       const Context& c);
// The logits of a tied head sharded by vocabulary (GPT's wte): this rank's
// columns [N, V/tp] of h · wteᵀ; h goes through copy_to (sequence parallel:
// gather_from_seq).
torch::Tensor parallel_lm_logits(const torch::Tensor& h, const torch::Tensor& w_shard,
                                 const Context& c);
// The cross-entropy of each row of logits split by vocabulary (logits [N,
// V/tp], rank r's columns [r*V/tp, (r+1)*V/tp)); target [N] holds full-vocabulary
// ids. Returns the per-row loss [N] (float32), the same on every rank: three
// collectives (the max, then the target logit and the sum of exponentials in one).
torch::Tensor vocab_parallel_cross_entropy(const torch::Tensor& logits, const torch::Tensor& target,
                                           PipeGroup* g);

// Sums the gradients of the parameters that see only a sequence shard under
// sequence parallelism (LayerNorm weights and biases, row-parallel biases)
// over the tensor group, in one all-reduce per dtype (a flat buffer); nothing
// at degree 1 or without sequence parallelism.
void allreduce_sequence_parallel_grads(const std::vector<torch::Tensor>& params, const Context& c);

// ---- weights ----------------------------------------------------------------
// Rank's block of master along dim (size must divide it), contiguous.
torch::Tensor shard(const torch::Tensor& master, int64_t dim, int rank, int size);
// Rank's part of a fused QKV weight [3d, in] or bias [3d] laid out q | k | v
// (GPT-2's c_attn): its heads' rows of each of q, k and v, concatenated, so the
// shard is again q | k | v, for heads/size heads.
torch::Tensor shard_qkv(const torch::Tensor& master, int rank, int size);

// ---- random numbers ---------------------------------------------------------
// Megatron's model-parallel RNG: dropout outside the tensor-parallel regions
// (on replicated activations) must draw the same mask on every tensor rank,
// inside them (on a rank's heads or MLP columns) different masks.
struct Seeds {
  uint64_t replicated = 0;  // the same on every tensor rank: the model seed
  uint64_t parallel = 0;    // seed + 2718 + tensor rank (Megatron's offset)
};
Seeds seeds(uint64_t seed, int tensor_rank);

// The squared gradient norm of a tensor-parallel model (0-d float64):
// sharded, the sum of squares of the rank's tensor-sharded parameters' (or
// pieces'), summed over the tensor group in one float64 all-reduce (none when
// tensor is null); replicated, the replicated parameters' (equal on every
// tensor rank), counted once. A non-finite replicated term on any tensor rank
// makes the result non-finite on every one (it rides in the all-reduce as
// replicated * 0), so fp16's found_inf (clip_grads) is the same on every rank
// of the group. Used by the trainer's tp clip, the pipeline's clip under tp
// and ZeRO under tp.
torch::Tensor tensor_parallel_sumsq(const torch::Tensor& sharded, const torch::Tensor& replicated,
                                    PipeGroup* tensor);

}  // namespace tp
}  // namespace cs
