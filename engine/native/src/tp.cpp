// tp.cpp: tensor and sequence parallelism's building blocks (tp.h).
#include "tp.h"

#include <cstdint>
#include <stdexcept>
#include <string>

namespace cs {
namespace tp {

// ---- the mesh ---------------------------------------------------------------

Mesh Mesh::of(int world, int tp, int pp) {
  if (world < 1 || tp < 1 || pp < 1 || world % (tp * pp) != 0)
    throw std::invalid_argument("tensor parallel mesh: tp (" + std::to_string(tp) + ") × pp (" +
                                std::to_string(pp) + ") must divide the " + std::to_string(world) +
                                " ranks");
  Mesh m;
  m.tp = tp;
  m.pp = pp;
  m.dp = world / (tp * pp);
  return m;
}

MeshCoords Mesh::coords(int rank) const {
  MeshCoords c;
  c.tensor = rank % tp;
  c.data = (rank / tp) % dp;
  c.pipe = rank / (tp * dp);
  return c;
}

std::vector<Partition> Mesh::partitions() const {
  Partition tensor, data, pipe;
  for (int p = 0; p < pp; p++)
    for (int d = 0; d < dp; d++) {
      std::vector<int> g;
      for (int t = 0; t < tp; t++) g.push_back(rank({t, d, p}));
      tensor.push_back(g);
    }
  for (int p = 0; p < pp; p++)
    for (int t = 0; t < tp; t++) {
      std::vector<int> g;
      for (int d = 0; d < dp; d++) g.push_back(rank({t, d, p}));
      data.push_back(g);
    }
  for (int d = 0; d < dp; d++)
    for (int t = 0; t < tp; t++) {
      std::vector<int> g;
      for (int p = 0; p < pp; p++) g.push_back(rank({t, d, p}));
      pipe.push_back(g);
    }
  return {tensor, data, pipe};
}

// ---- collectives ------------------------------------------------------------
namespace {

int64_t norm_dim(const torch::Tensor& x, int64_t dim) { return dim < 0 ? dim + x.dim() : dim; }

int64_t block(const torch::Tensor& x, int64_t dim, int n, const char* what) {
  const int64_t s = x.size(dim);
  if (s % n != 0)
    throw std::invalid_argument(std::string("tensor parallel ") + what + ": dimension " +
                                std::to_string(dim) + " of size " + std::to_string(s) +
                                " does not split over " + std::to_string(n) + " ranks");
  return s / n;
}

// x's sizes with dim n times as long.
std::vector<int64_t> merged_sizes(const torch::Tensor& x, int64_t dim, int n) {
  auto sizes = x.sizes().vec();
  sizes[size_t(dim)] *= n;
  return sizes;
}

torch::Tensor all_reduce(const torch::Tensor& x, PipeGroup& g) {
  auto y = x.clone(at::MemoryFormat::Contiguous);
  g.all_reduce_sum(y);
  return y;
}

torch::Tensor split(const torch::Tensor& x, PipeGroup& g, int64_t dim) {
  dim = norm_dim(x, dim);
  const int64_t k = block(x, dim, g.size(), "split");
  return x.narrow(dim, g.rank() * k, k).contiguous();
}

enum class Op : int64_t { Identity, AllReduce, Split, Gather, ReduceScatter };

torch::Tensor run_op(Op op, const torch::Tensor& x, PipeGroup& g, int64_t dim) {
  switch (op) {
    case Op::Identity: return x;
    case Op::AllReduce: return all_reduce(x, g);
    case Op::Split: return split(x, g, dim);
    case Op::Gather: return all_gather(x, g, dim);
    case Op::ReduceScatter: return reduce_scatter(x, g, dim);
  }
  throw std::logic_error("tensor parallel: unknown op");
}

// One collective forward and its conjugate backward (Megatron's mappings.py).
struct Conjugate : torch::autograd::Function<Conjugate> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x, PipeGroup* g,
                               int64_t dim, int64_t fwd, int64_t bwd) {
    ctx->saved_data["g"] = static_cast<int64_t>(reinterpret_cast<intptr_t>(g));
    ctx->saved_data["dim"] = dim;
    ctx->saved_data["bwd"] = bwd;
    return run_op(Op(fwd), x, *g, dim);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    auto* g = reinterpret_cast<PipeGroup*>(static_cast<intptr_t>(ctx->saved_data["g"].toInt()));
    auto out = run_op(Op(ctx->saved_data["bwd"].toInt()), grad[0], *g,
                     ctx->saved_data["dim"].toInt());
    return {out, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

torch::Tensor conjugate(const torch::Tensor& x, PipeGroup* g, int64_t dim, Op fwd, Op bwd) {
  if (g == nullptr || g->size() == 1) return x;
  return Conjugate::apply(x, g, norm_dim(x, dim), int64_t(fwd), int64_t(bwd));
}

}  // namespace

// The group's all-gather fills [size, x...] (rank r's x at [r]); moving that
// dimension next to dim and merging the two puts rank r's block at
// [r*k, (r+1)*k) along dim. Exact: the bytes are copied.
torch::Tensor all_gather(const torch::Tensor& x, PipeGroup& g, int64_t dim) {
  dim = norm_dim(x, dim);
  torch::NoGradGuard ng;
  auto in = x.contiguous();
  auto stacked_sizes = in.sizes().vec();
  stacked_sizes.insert(stacked_sizes.begin(), int64_t(g.size()));
  auto stacked = torch::empty(stacked_sizes, in.options().memory_format(at::MemoryFormat::Contiguous));
  g.all_gather(in, stacked);
  if (dim == 0) return stacked.view(merged_sizes(in, dim, g.size()));
  return stacked.movedim(0, dim).reshape(merged_sizes(in, dim, g.size())).contiguous();
}

// The blocks along dim laid out rank-major ([size, ...] with block r at [r]),
// the group's reduce-scatter, this rank's block of the sum.
torch::Tensor reduce_scatter(const torch::Tensor& x, PipeGroup& g, int64_t dim) {
  dim = norm_dim(x, dim);
  const int64_t k = block(x, dim, g.size(), "reduce-scatter");
  torch::NoGradGuard ng;
  auto split_sizes = x.sizes().vec();
  split_sizes[size_t(dim)] = k;
  split_sizes.insert(split_sizes.begin() + dim, int64_t(g.size()));
  auto blocks = x.reshape(split_sizes).movedim(dim, 0).contiguous();
  split_sizes.erase(split_sizes.begin() + dim);
  auto out = torch::empty(split_sizes, x.options().memory_format(at::MemoryFormat::Contiguous));
  g.reduce_scatter_sum(blocks, out);
  return out;
}

torch::Tensor copy_to(const torch::Tensor& x, PipeGroup* g) {
  return conjugate(x, g, -1, Op::Identity, Op::AllReduce);
}
torch::Tensor reduce_from(const torch::Tensor& x, PipeGroup* g) {
  return conjugate(x, g, -1, Op::AllReduce, Op::Identity);
}
torch::Tensor scatter_to(const torch::Tensor& x, PipeGroup* g) {
  return conjugate(x, g, -1, Op::Split, Op::Gather);
}
torch::Tensor gather_from(const torch::Tensor& x, PipeGroup* g) {
  return conjugate(x, g, -1, Op::Gather, Op::Split);
}
torch::Tensor gather_from_seq(const torch::Tensor& x, PipeGroup* g, int64_t dim) {
  return conjugate(x, g, dim, Op::Gather, Op::ReduceScatter);
}
torch::Tensor reduce_scatter_to_seq(const torch::Tensor& x, PipeGroup* g, int64_t dim) {
  return conjugate(x, g, dim, Op::ReduceScatter, Op::Gather);
}
torch::Tensor scatter_to_seq(const torch::Tensor& x, PipeGroup* g, int64_t dim) {
  return conjugate(x, g, dim, Op::Split, Op::Gather);
}

// ---- layers -----------------------------------------------------------------
namespace {

torch::Tensor enter(const torch::Tensor& x, const Context& c) {
  return c.sequence_parallel ? gather_from_seq(x, c.group, c.seq_dim) : copy_to(x, c.group);
}

torch::Tensor leave(const torch::Tensor& x, const Context& c) {
  return c.sequence_parallel ? reduce_scatter_to_seq(x, c.group, c.seq_dim) : reduce_from(x, c.group);
}

}  // namespace

torch::Tensor column_parallel_linear(const torch::Tensor& x, const torch::Tensor& w,
                                     const torch::Tensor& b, const Context& c) {
  return torch::linear(enter(x, c), w, b);
}

torch::Tensor row_parallel_linear(const torch::Tensor& x, const torch::Tensor& w,
                                  const torch::Tensor& b, const Context& c) {
  auto y = leave(torch::linear(x, w), c);
  return b.defined() ? y + b : y;
}

torch::Tensor vocab_parallel_embedding(const torch::Tensor& ids, const torch::Tensor& w,
                                       const Context& c) {
  if (c.size() == 1) return torch::embedding(w, ids);
  const int64_t rows = w.size(0), start = int64_t(c.rank()) * rows;
  auto outside = (ids < start).logical_or(ids >= start + rows);
  auto local = (ids - start).masked_fill(outside, 0);
  auto e = torch::embedding(w, local).masked_fill(outside.unsqueeze(-1), 0.0);
  return leave(e, c);
}

torch::Tensor parallel_lm_logits(const torch::Tensor& h, const torch::Tensor& w_shard,
                                 const Context& c) {
  return column_parallel_linear(h, w_shard, torch::Tensor(), c);
}

namespace {

// Megatron's cross_entropy.py: the loss of rows whose logits are split by
// vocabulary, and its gradient softmax - onehot(target) on this rank's columns.
struct VocabParallelCE : torch::autograd::Function<VocabParallelCE> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor logits,
                               torch::Tensor target, PipeGroup* g) {
    torch::NoGradGuard ng;
    const int64_t V = logits.size(1), start = int64_t(g->rank()) * V;
    auto l = logits.to(torch::kFloat);
    // The max over the whole vocabulary (exact: a gather of each rank's max).
    auto m = all_gather(l.amax(1).unsqueeze(0), *g, 0).amax(0);
    l = l - m.unsqueeze(1);
    auto outside = (target < start).logical_or(target >= start + V);
    auto local = (target - start).masked_fill(outside, 0);
    auto picked = l.gather(1, local.unsqueeze(1)).squeeze(1).masked_fill(outside, 0.0);
    auto e = l.exp();
    // The target logit and the sum of exponentials in one all-reduce.
    auto both = torch::stack({picked, e.sum(1)}).contiguous();
    g->all_reduce_sum(both);
    auto sum = both[1];
    ctx->save_for_backward({e.div_(sum.unsqueeze(1)), local, outside});
    ctx->saved_data["dtype"] = int64_t(logits.scalar_type());
    return sum.log() - both[0];
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    auto saved = ctx->get_saved_variables();
    auto d = saved[0].clone();  // softmax on this rank's columns
    auto hit = saved[2].logical_not().to(d.scalar_type()).unsqueeze(1);
    d.scatter_add_(1, saved[1].unsqueeze(1), -hit);
    d.mul_(grad[0].to(d.scalar_type()).unsqueeze(1));
    auto dtype = c10::ScalarType(ctx->saved_data["dtype"].toInt());
    return {d.to(dtype), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor vocab_parallel_cross_entropy(const torch::Tensor& logits, const torch::Tensor& target,
                                           PipeGroup* g) {
  if (g == nullptr || g->size() == 1)
    return torch::nn::functional::cross_entropy(
        logits.to(torch::kFloat), target,
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
  return VocabParallelCE::apply(logits, target, g);
}

// One all-reduce per dtype over all these gradients (pipeline_group.h
// coalesced_all_reduce_sum), as Megatron's _allreduce_layernorm_grads.
void allreduce_sequence_parallel_grads(const std::vector<torch::Tensor>& params, const Context& c) {
  if (!c.sequence_parallel || c.group == nullptr || c.size() == 1) return;
  std::vector<torch::Tensor> grads;
  for (const auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  coalesced_all_reduce_sum(grads, *c.group);
}

// ---- weights ----------------------------------------------------------------

torch::Tensor shard(const torch::Tensor& master, int64_t dim, int rank, int size) {
  dim = norm_dim(master, dim);
  const int64_t k = block(master, dim, size, "shard");
  return master.narrow(dim, int64_t(rank) * k, k).contiguous();
}

torch::Tensor shard_qkv(const torch::Tensor& master, int rank, int size) {
  if (master.size(0) % 3 != 0)
    throw std::invalid_argument("tensor parallel shard_qkv: the first dimension " +
                                std::to_string(master.size(0)) + " is not q | k | v");
  auto parts = master.chunk(3, 0);
  return torch::cat({shard(parts[0], 0, rank, size), shard(parts[1], 0, rank, size),
                     shard(parts[2], 0, rank, size)},
                    0);
}

Seeds seeds(uint64_t seed, int tensor_rank) {
  return {seed, seed + 2718 + uint64_t(tensor_rank)};
}

torch::Tensor tensor_parallel_sumsq(const torch::Tensor& sharded, const torch::Tensor& replicated,
                                    PipeGroup* tensor) {
  torch::NoGradGuard ng;
  const torch::Tensor rep = replicated.to(torch::kFloat64);
  // The replicated term rides along as rep * 0: +0 exactly when it is finite
  // (the sum, and so the norm, bit for bit what it was), nan when this rank's
  // replicated gradients overflowed (fp16). So a non-finite replicated
  // gradient on any tensor rank makes every rank's total non-finite and every
  // rank skips the step (clip_grads' found_inf), Megatron's all-reduce of
  // found_inf over the model-parallel group without a second collective. The
  // replicated gradients are equal on every tensor rank when the kernels are
  // deterministic; this does not depend on it.
  torch::Tensor s = (sharded.to(torch::kFloat64) + rep * 0.0).reshape({1}).contiguous();
  if (tensor) tensor->all_reduce_sum(s);
  return s.reshape({}) + rep;
}

}  // namespace tp
}  // namespace cs
