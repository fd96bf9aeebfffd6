// tp_shards.cpp: a tensor-parallel model's shards and their gather (tp_shards.h).
#include "tp_shards.h"

#include <limits>

#include "model.h"

namespace cs {
namespace tp {

void Shards::keep(torch::Tensor& p, Split how, const torch::Tensor& shard) {
  p.set_data(shard);
  split_[p.unsafeGetTensorImpl()] = how;
}

bool Shards::sharded(const torch::Tensor& p) const {
  auto it = split_.find(p.unsafeGetTensorImpl());
  return it != split_.end() && it->second != Split::Replicated;
}

std::vector<torch::Tensor> Shards::gathered(const std::vector<torch::Tensor>& params, PipeGroup* g,
                                            int64_t vocab) const {
  torch::NoGradGuard ng;
  std::vector<torch::Tensor> out;
  for (const auto& p : params) {
    auto it = split_.find(p.unsafeGetTensorImpl());
    const Split how = it == split_.end() ? Split::Replicated : it->second;
    auto t = p.detach().contiguous();
    if (how == Split::Replicated || g == nullptr || g->size() == 1) {
      out.push_back(t);
    } else if (how == Split::Columns) {
      out.push_back(all_gather(t, *g, 1));
    } else if (how == Split::Rows) {
      out.push_back(all_gather(t, *g, 0));
    } else if (how == Split::Vocab) {
      out.push_back(all_gather(t, *g, 0).narrow(0, 0, vocab).contiguous());
    } else {  // Split::QKV: [rank][q|k|v][rows] back to [q|k|v][rank][rows]
      auto all = all_gather(t, *g, 0);
      std::vector<int64_t> sz{int64_t(g->size()), 3, t.size(0) / 3};
      for (int64_t d = 1; d < t.dim(); d++) sz.push_back(t.size(d));
      auto full = t.sizes().vec();
      full[0] *= g->size();
      out.push_back(all.view(sz).transpose(0, 1).reshape(full).contiguous());
    }
  }
  return out;
}

int64_t check_split(int64_t heads, int64_t seq_len, int64_t vocab, const Context& c,
                    const std::string& model) {
  return check_split(heads, seq_len, vocab, c.size(), c.sequence_parallel, model);
}

int64_t check_split(int64_t heads, int64_t seq_len, int64_t vocab, int64_t n, bool sequence_parallel,
                    const std::string& model) {
  const std::string what = "tp.degree " + std::to_string(n);
  if (heads % n != 0)
    throw ConfigError(what + " must divide the attention heads (" + std::to_string(heads) + " in " +
                      model + ")");
  if (sequence_parallel && seq_len % n != 0)
    throw ConfigError("tp.sequence_parallel splits the sequence over the tensor group: seq_len (" +
                      std::to_string(seq_len) + ") must be a multiple of " + what);
  return (n - vocab % n) % n;
}

torch::Tensor pad_rows(const torch::Tensor& master, int64_t pad) {
  if (pad == 0) return master;
  auto sz = master.sizes().vec();
  sz[0] = pad;
  return torch::cat({master, torch::zeros(sz, master.options())});
}

torch::Tensor mask_vocab_padding(const torch::Tensor& logits, int64_t pad, const Context& c) {
  if (pad == 0 || c.rank() != c.size() - 1) return logits;
  const int64_t cols = logits.size(1);
  auto mask = torch::arange(cols, logits.options().dtype(torch::kInt64)) >= cols - pad;
  return logits.masked_fill(mask, -std::numeric_limits<float>::infinity());
}

}  // namespace tp
}  // namespace cs
