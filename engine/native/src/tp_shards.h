// tp_shards.h: which of a tensor-parallel model's parameters are this rank's
// shards and how each was cut from the degree-1 weight, so that a model
// (gpt.cpp, bert.cpp) keeps its shards and gathers the whole model back in the
// degree-1 order and layout (TensorParallelModel::gathered_parameters, the
// checksum's view). docs/tensor-parallel.md.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "tp.h"

namespace cs {
namespace tp {

// How a parameter is split over the tensor group.
enum class Split {
  Replicated,  // the same on every tensor rank
  Rows,        // dim 0 in blocks (column-parallel weights and their biases)
  Columns,     // dim 1 in blocks (row-parallel weights)
  QKV,         // a fused q | k | v weight or bias by heads (shard_qkv)
  Vocab,       // dim 0 by vocabulary, padded with zero rows to a multiple of the degree
};

class Shards {
 public:
  // Makes p this rank's shard (Tensor::set_data) and records how it was cut.
  void keep(torch::Tensor& p, Split how, const torch::Tensor& shard);
  // Whether p is a shard (anything but Replicated).
  bool sharded(const torch::Tensor& p) const;
  // params (this rank's, in the model's order) made whole: each shard
  // all-gathered over g and put back in the degree-1 layout (q | k | v rows
  // reordered, the vocabulary cut back to vocab rows); replicated ones as they
  // are. A collective: every rank of g calls it. g nullptr: params as they are.
  std::vector<torch::Tensor> gathered(const std::vector<torch::Tensor>& params, PipeGroup* g,
                                      int64_t vocab) const;

 private:
  std::unordered_map<const c10::TensorImpl*, Split> split_;
};

// The model's split over c's group: throws ConfigError unless the degree
// divides the attention heads (model names it, e.g. "gpt 124m at hidden 768")
// and, under sequence parallelism, seq_len; returns the vocabulary padding,
// the rows that make vocab a multiple of the degree.
int64_t check_split(int64_t heads, int64_t seq_len, int64_t vocab, const Context& c,
                    const std::string& model);
// The same for a degree and sequence parallelism given as numbers, before any
// group exists (the trainer checks it so, on every rank alike, before it
// joins the groups: a rank refusing later left a peer that was still joining
// one to fail on its closed connection).
int64_t check_split(int64_t heads, int64_t seq_len, int64_t vocab, int64_t degree, bool sequence_parallel,
                    const std::string& model);

// Rows of zeros (or zero entries) appended to master along dim 0, pad of them.
torch::Tensor pad_rows(const torch::Tensor& master, int64_t pad);

// logits [N, V/tp] of a vocabulary padded by pad rows with the padding's
// columns (the last rank's last pad) set to -inf, so the vocabulary-parallel
// cross-entropy is the unpadded vocabulary's.
torch::Tensor mask_vocab_padding(const torch::Tensor& logits, int64_t pad, const Context& c);

}  // namespace tp
}  // namespace cs
