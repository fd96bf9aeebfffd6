// tp_model.h: what a tensor-parallel model gives the trainer beyond model.h
// (docs/tensor-parallel.md). The trainer builds the rank mesh and its groups
// (tp.h), builds the model with its tensor group, and after each backward
// sums the sequence-parallel gradients over the tensor group, averages every
// gradient over the data group and clips by the whole model's norm, which
// counts each sharded parameter's squares over the tensor group and each
// replicated one once.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "model.h"
#include "tp.h"

namespace cs {

class TensorParallelModel {
 public:
  virtual ~TensorParallelModel() = default;
  // Whether p is this rank's shard of a parameter split over the tensor group
  // (else it is replicated: the same values and gradients on every tensor rank).
  virtual bool tensor_sharded(const torch::Tensor& p) const = 0;
  // The parameters that see only this rank's sequence shard under sequence
  // parallelism (LayerNorms, row-parallel biases, position embeddings): their
  // gradients are summed over the tensor group (tp::allreduce_sequence_parallel_grads).
  virtual std::vector<torch::Tensor> sequence_parallel_params() const = 0;
  // The whole model's parameters in the degree-1 model's order and layout
  // (gathered over the tensor group: every tensor rank must call it), for
  // the checksum: a degree-N run's checksum is a degree-1 model's.
  virtual std::vector<torch::Tensor> gathered_parameters() = 0;
  // The same for some of them (a pipeline stage's, in the model's order),
  // each in its degree-1 layout; every tensor rank calls it with the same list.
  virtual std::vector<torch::Tensor> gathered(const std::vector<torch::Tensor>& params) = 0;
  // Parameters of the whole (degree-1) model, for the trainer's check against
  // describe().
  virtual int64_t full_numel() const = 0;
};

// GPT on a tensor group (gpt.cpp): column-parallel c_attn with the heads
// split, row-parallel projections, column-parallel MLP up, vocabulary-parallel
// wte with the tied head and the vocabulary-parallel cross-entropy; sequence
// parallelism per c.sequence_parallel. Every rank builds the degree-1 model's
// weights from the seed and keeps its shards. Throws ConfigError when the heads
// do not split over the group (the vocabulary is padded to a multiple of the
// degree, the padding's logits masked out, so the loss is the unpadded model's).
std::shared_ptr<Model> make_gpt_tp(const ModelConfig& c, torch::Device device,
                                   const tp::Context& ctx);

// BERT on a tensor group (bert.cpp), the same split: each encoder layer's
// q | k | v by heads, its attention output and output dense row-parallel, its
// intermediate column-parallel; the word embedding and the tied MLM decoder
// (with its bias) by vocabulary, padded to a multiple of the degree; the MLM
// transform, the pooler and the NSP classifier replicated. Throws ConfigError
// when the heads do not split over the group.
std::shared_ptr<Model> make_bert_tp(const ModelConfig& c, torch::Device device,
                                    const tp::Context& ctx);

}  // namespace cs
