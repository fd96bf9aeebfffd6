// gpt.cpp: the GPT family, GPT-2's architecture (Radford et al. 2019; the layout
// of Hugging Face's GPT2LMHeadModel): learned token and position embeddings,
// pre-LayerNorm blocks of causal self-attention and a 4x GELU(tanh) MLP, a final
// LayerNorm, and an output head tied to the token embedding. No dropout.
// With a tensor group (tp_model.h, docs/tensor-parallel.md) the same model is
// split Megatron-style over the group's ranks.
#include <cmath>
#include <map>

#include <ATen/CPUGeneratorImpl.h>

#include "add_layer_norm.h"
#include "compat.h"
#include "device.h"
#include "linear_act.h"
#include "linear_casts.h"
#include "linear_ce.h"
#include "model.h"
#include "precision.h"
#include "row_random.h"
#include "tp_model.h"
#include "tp_shards.h"

namespace cs {
namespace {

struct GPTShape {
  int64_t layers, hidden, heads, vocab, positions, seq_len;
};

struct Preset {
  int64_t layers, hidden, heads, vocab, positions;
};

// GPT-2 small/medium/large/xl (vocab 50257, 1024 positions) and a CPU-sized toy.
const std::map<std::string, Preset>& presets() {
  static const std::map<std::string, Preset> p = {
      {"tiny", {2, 64, 4, 256, 256}},
      {"124m", {12, 768, 12, 50257, 1024}},
      {"350m", {24, 1024, 16, 50257, 1024}},
      {"774m", {36, 1280, 20, 50257, 1024}},
      {"1.5b", {48, 1600, 25, 50257, 1024}},
  };
  return p;
}

int64_t default_seq_len(const std::string& preset) { return preset == "tiny" ? 64 : 1024; }

GPTShape shape_of(const ModelConfig& c) {
  auto it = presets().find(c.preset);
  if (it == presets().end()) {
    std::string names;
    for (const auto& kv : presets()) names += (names.empty() ? "" : ", ") + kv.first;
    throw ConfigError("preset \"" + c.preset + "\" is not a gpt preset; valid: " + names);
  }
  const Preset& p = it->second;
  GPTShape s{p.layers, p.hidden, p.heads, p.vocab, p.positions, default_seq_len(c.preset)};
  if (c.layers > 0) s.layers = c.layers;
  if (c.hidden > 0) {
    const int64_t head_dim = p.hidden / p.heads;
    if (c.hidden % head_dim != 0)
      throw ConfigError("hidden must be a multiple of the head size " + std::to_string(head_dim) +
                        " for gpt " + c.preset + ", got " + std::to_string(c.hidden));
    s.hidden = c.hidden;
    s.heads = c.hidden / head_dim;
  }
  if (c.seq_len > 0) s.seq_len = c.seq_len;
  if (s.seq_len > s.positions)
    throw ConfigError("seq_len must be ≤ " + std::to_string(s.positions) + " (positions of gpt " +
                      c.preset + "), got " + std::to_string(s.seq_len));
  if (c.image_size != 0) throw ConfigError("image_size does not apply to gpt");
  if (c.channels_last) throw ConfigError("channels_last does not apply to gpt");
  return s;
}

// Parameters: token and position embeddings, per block 12·d² + 13·d (qkv and
// projection weights and biases, MLP weights and biases, two LayerNorms), final LN.
int64_t param_count(const GPTShape& s) {
  const int64_t d = s.hidden;
  return s.vocab * d + s.positions * d + s.layers * (12 * d * d + 13 * d) + 2 * d;
}

Facts describe(const ModelConfig& c) {
  const GPTShape s = shape_of(c);
  Facts f;
  f.params = param_count(s);
  // Training FLOPs of one sample of T tokens (forward + backward, PaLM appendix B):
  // 6·N·T for the weight matmuls, N = params without position embeddings (the
  // tied head's V·d counts once), plus 12·L·d·T² for attention scores and values.
  const double n = double(f.params - s.positions * s.hidden);
  const double T = double(s.seq_len);
  f.flops_per_sample = 6.0 * n * T + 12.0 * double(s.layers) * double(s.hidden) * T * T;
  f.tokens_per_sample = s.seq_len;
  f.shapes = {{"layers", s.layers},   {"hidden", s.hidden},       {"heads", s.heads},
              {"vocab", s.vocab},     {"positions", s.positions}, {"seq_len", s.seq_len},
              {"micro_batch", c.micro_batch}};
  return f;
}

using ModulePtr = std::shared_ptr<torch::nn::Module>;

// A child module that only holds parameters, so that names read like Hugging
// Face's (h.0.attn.c_attn.weight).
ModulePtr child(torch::nn::Module& parent, const std::string& name) {
  return parent.register_module(name, std::make_shared<torch::nn::Module>());
}

struct BlockImpl : torch::nn::Module {
  BlockImpl(int64_t d, int64_t heads, const torch::TensorOptions& o) : heads(heads) {
    auto ln1 = child(*this, "ln_1");
    ln_1_w = ln1->register_parameter("weight", torch::ones({d}, o));
    ln_1_b = ln1->register_parameter("bias", torch::zeros({d}, o));
    auto attn = child(*this, "attn");
    auto c_attn = child(*attn, "c_attn");
    c_attn_w = c_attn->register_parameter("weight", torch::empty({3 * d, d}, o));
    c_attn_b = c_attn->register_parameter("bias", torch::zeros({3 * d}, o));
    auto attn_proj = child(*attn, "c_proj");
    attn_proj_w = attn_proj->register_parameter("weight", torch::empty({d, d}, o));
    attn_proj_b = attn_proj->register_parameter("bias", torch::zeros({d}, o));
    auto ln2 = child(*this, "ln_2");
    ln_2_w = ln2->register_parameter("weight", torch::ones({d}, o));
    ln_2_b = ln2->register_parameter("bias", torch::zeros({d}, o));
    auto mlp = child(*this, "mlp");
    auto c_fc = child(*mlp, "c_fc");
    c_fc_w = c_fc->register_parameter("weight", torch::empty({4 * d, d}, o));
    c_fc_b = c_fc->register_parameter("bias", torch::zeros({4 * d}, o));
    auto mlp_proj = child(*mlp, "c_proj");
    mlp_proj_w = mlp_proj->register_parameter("weight", torch::empty({d, 4 * d}, o));
    mlp_proj_b = mlp_proj->register_parameter("bias", torch::zeros({d}, o));
  }

  torch::Tensor forward(const torch::Tensor& x) {
    if (fused_norms(x)) {
      auto o = forward_fused(x, torch::Tensor());
      return o.r + o.y;
    }
    const auto B = x.size(0), T = x.size(1), d = x.size(2);
    auto h = block_layer_norm(x, ln_1_w, ln_1_b, 1e-5);
    auto qkv = linear_qkv(h, c_attn_w, c_attn_b, heads);
    auto y = compat::causal_attention(qkv[0], qkv[1], qkv[2]);  // [B, H, T, hd]
    y = y.transpose(1, 2).contiguous().view({B, T, d});
    auto r = x + linear_act(y, attn_proj_w, attn_proj_b, Act::None);
    h = block_layer_norm(r, ln_2_w, ln_2_b, 1e-5);
    h = linear_act(h, c_fc_w, c_fc_b, Act::GeluTanh);
    return r + linear_act(h, mlp_proj_w, mlp_proj_b, Act::None);
  }

  // Whether the residual adds and LayerNorms run as add_layer_norm kernels
  // (kernels.h "ln"): on CUDA under autocast.
  static bool fused_norms(const torch::Tensor& x) {
    return x.is_cuda() && compat::autocast_enabled(c10::DeviceType::CUDA) &&
           add_layer_norm_fused(x, torch::Tensor(), compat::autocast_dtype(c10::DeviceType::CUDA));
  }

  // The block with its residual adds inside the LayerNorm kernels: the input
  // is the residual stream x plus the previous block's MLP output delta (not
  // added yet; undefined for none), the result {r, y} the same for the next
  // block: r the residual stream after attention, y the MLP output.
  AddNorm forward_fused(const torch::Tensor& x, const torch::Tensor& delta) {
    const auto dt = compat::autocast_dtype(c10::DeviceType::CUDA);
    const auto B = x.size(0), T = x.size(1), d = x.size(2);
    auto n1 = add_layer_norm(x, delta, ln_1_w, ln_1_b, 1e-5, dt);
    auto qkv = linear_qkv(n1.y, c_attn_w, c_attn_b, heads);
    auto y = compat::causal_attention(qkv[0], qkv[1], qkv[2]);
    y = y.transpose(1, 2).contiguous().view({B, T, d});
    auto n2 = add_layer_norm(n1.r, linear_act(y, attn_proj_w, attn_proj_b, Act::None), ln_2_w,
                             ln_2_b, 1e-5, dt);
    auto h = linear_act(n2.y, c_fc_w, c_fc_b, Act::GeluTanh);
    return {n2.r, linear_act(h, mlp_proj_w, mlp_proj_b, Act::None)};
  }

  // The block on a tensor group (c.size() > 1): this rank's heads of c_attn
  // (column-parallel, tp::shard_qkv), attention on them, the row-parallel
  // projection (bias after the reduce), the column-parallel MLP up and the
  // row-parallel MLP down. Under sequence parallelism x and the residual
  // stream are this rank's sequence shard [B, T/tp, d]: the LayerNorms run on
  // it, the all-gather enters each parallel region and the reduce-scatter
  // leaves it.
  torch::Tensor forward_tp(const torch::Tensor& x, const tp::Context& c) {
    auto enter = [&](const torch::Tensor& t) {
      return c.sequence_parallel ? tp::gather_from_seq(t, c.group, 1) : tp::copy_to(t, c.group);
    };
    auto h = enter(block_layer_norm(x, ln_1_w, ln_1_b, 1e-5));
    const auto B = h.size(0), T = h.size(1);
    auto qkv = linear_qkv(h, c_attn_w, c_attn_b, heads / c.size());
    auto y = compat::causal_attention(qkv[0], qkv[1], qkv[2]);  // [B, H/tp, T, hd]
    y = y.transpose(1, 2).contiguous().view({B, T, -1});
    auto r = x + tp::row_parallel_linear(y, attn_proj_w, attn_proj_b, c);
    h = linear_act(enter(block_layer_norm(r, ln_2_w, ln_2_b, 1e-5)), c_fc_w, c_fc_b, Act::GeluTanh);
    return r + tp::row_parallel_linear(h, mlp_proj_w, mlp_proj_b, c);
  }

  // The weights and biases its linear layers cast under autocast (LinearCasts).
  std::vector<torch::Tensor> linear_params() const {
    return {c_attn_w, c_attn_b, attn_proj_w, attn_proj_b, c_fc_w, c_fc_b, mlp_proj_w, mlp_proj_b};
  }

  int64_t heads;
  torch::Tensor ln_1_w, ln_1_b, c_attn_w, c_attn_b, attn_proj_w, attn_proj_b;
  torch::Tensor ln_2_w, ln_2_b, c_fc_w, c_fc_b, mlp_proj_w, mlp_proj_b;
};

class GPT : public Model, public TensorParallelModel, public LinearCopiesModel {
 public:
  GPT(const ModelConfig& c, torch::Device device, const tp::Context& ctx = tp::Context())
      : s_(shape_of(c)), checkpointing_(c.activation_checkpointing), ctx_(ctx) {
    const int64_t d = s_.hidden;
    const auto o = torch::TensorOptions().device(device);
    wte_ = child(*this, "wte")->register_parameter("weight", torch::empty({s_.vocab, d}, o));
    wpe_ = child(*this, "wpe")->register_parameter("weight", torch::empty({s_.positions, d}, o));
    auto h = register_module("h", torch::nn::ModuleList());
    for (int64_t i = 0; i < s_.layers; i++) {
      blocks_.push_back(std::make_shared<BlockImpl>(d, s_.heads, o));
      h->push_back(blocks_.back());
    }
    auto ln_f = child(*this, "ln_f");
    ln_f_w_ = ln_f->register_parameter("weight", torch::ones({d}, o));
    ln_f_b_ = ln_f->register_parameter("bias", torch::zeros({d}, o));
    init_weights(device, uint64_t(c.seed));
    for (const auto& p : parameters()) full_numel_ += p.numel();
    if (tp_on()) shard_tensor_parallel(c);
  }

  int64_t num_layers() const override { return s_.layers + 2; }

  torch::Tensor forward_layers(int64_t first, int64_t last, const torch::Tensor& x_in,
                               const Batch& b) override {
    if (tp_on()) return forward_tp(first, last, x_in, b);
    if (!checkpointing_ && (first > 0 ? BlockImpl::fused_norms(x_in) : b.input.is_cuda()))
      return forward_fused(first, last, x_in, b);
    torch::Tensor x = x_in;
    for (int64_t i = first; i < last; i++) {
      if (i == 0) {
        const auto T = b.input.size(1);
        x = torch::embedding(wte_, b.input) + wpe_.narrow(0, 0, T);
      } else if (i <= s_.layers) {
        auto blk = blocks_[size_t(i - 1)];
        if (checkpointing_ && torch::GradMode::is_enabled() && x.requires_grad())
          x = checkpoint([blk](const torch::Tensor& t) { return blk->forward(t); }, x);
        else
          x = blk->forward(x);
      } else {
        x = block_layer_norm(x, ln_f_w_, ln_f_b_, 1e-5);
      }
    }
    return x;
  }

  // forward_layers with each block's last residual add carried into the next
  // LayerNorm kernel (BlockImpl::forward_fused); the sum is formed only where
  // the range ends before the final LayerNorm.
  torch::Tensor forward_fused(int64_t first, int64_t last, const torch::Tensor& x_in,
                              const Batch& b) {
    std::vector<torch::Tensor> lin;  // the range's linear layers, cast at once
    for (int64_t i = std::max<int64_t>(first, 1); i < last && i <= s_.layers; i++) {
      auto p = blocks_[size_t(i - 1)]->linear_params();
      lin.insert(lin.end(), p.begin(), p.end());
    }
    LinearCasts casts(lin, copies_.get());
    torch::Tensor x = x_in, delta;
    for (int64_t i = first; i < last; i++) {
      if (i == 0) {
        const auto T = b.input.size(1);
        x = torch::embedding(wte_, b.input) + wpe_.narrow(0, 0, T);
        if (!BlockImpl::fused_norms(x)) return forward_layers_from(x, 1, last, b);
      } else if (i <= s_.layers) {
        auto o = blocks_[size_t(i - 1)]->forward_fused(x, delta);
        x = o.r;
        delta = o.y;
      } else {
        x = add_layer_norm(x, delta, ln_f_w_, ln_f_b_, 1e-5,
                           compat::autocast_dtype(c10::DeviceType::CUDA))
                .y;
        delta = torch::Tensor();
      }
    }
    return delta.defined() ? x + delta : x;
  }

  // The portable loop from layer first on (x: layer first - 1's output).
  torch::Tensor forward_layers_from(const torch::Tensor& x_in, int64_t first, int64_t last,
                                    const Batch& b) {
    torch::Tensor x = x_in;
    for (int64_t i = first; i < last; i++) {
      if (i <= s_.layers)
        x = blocks_[size_t(i - 1)]->forward(x);
      else
        x = block_layer_norm(x, ln_f_w_, ln_f_b_, 1e-5);
    }
    return x;
  }

  // The tied head and the cross-entropy, fused (linear_ce.h). On a tensor
  // group: this rank's vocabulary columns of the logits (the padding's masked
  // out) and the vocabulary-parallel cross-entropy, the full model's loss on
  // every rank.
  torch::Tensor loss(const torch::Tensor& out, const Batch& b) override {
    if (tp_on()) {
      auto logits = tp::parallel_lm_logits(out, wte_, ctx_);
      logits = tp::mask_vocab_padding(logits.reshape({-1, logits.size(-1)}), vocab_pad_, ctx_);
      return tp::vocab_parallel_cross_entropy(logits, b.target.reshape({-1}), ctx_.group).mean();
    }
    return linear_cross_entropy(out.reshape({-1, s_.hidden}), wte_, b.target.reshape({-1}));
  }

  std::vector<torch::Tensor> layer_parameters(int64_t layer) override {
    if (layer == 0) return {wte_, wpe_};
    if (layer <= s_.layers) return blocks_[size_t(layer - 1)]->parameters();
    if (layer == s_.layers + 1) return {ln_f_w_, ln_f_b_};
    throw std::out_of_range("gpt layer " + std::to_string(layer));
  }

  // The linear layers' casts its forward keeps (LinearCasts, kernels.h "adamc").
  std::shared_ptr<LinearCopies> linear_copies() override { return copies_; }

  std::vector<torch::Tensor> loss_parameters() override { return {wte_}; }  // tied head

  // nanoGPT's rule: matmul weights and embeddings decay; biases and LayerNorms do not.
  bool decays(const std::string& name) const override {
    return name.find("ln_") == std::string::npos && name.find("bias") == std::string::npos;
  }

  // ---- TensorParallelModel ----
  bool tensor_sharded(const torch::Tensor& p) const override { return shards_.sharded(p); }

  std::vector<torch::Tensor> sequence_parallel_params() const override {
    std::vector<torch::Tensor> out{wpe_, ln_f_w_, ln_f_b_};
    for (const auto& blk : blocks_)
      out.insert(out.end(), {blk->ln_1_w, blk->ln_1_b, blk->attn_proj_b, blk->ln_2_w, blk->ln_2_b,
                             blk->mlp_proj_b});
    return out;
  }

  std::vector<torch::Tensor> gathered_parameters() override { return gathered(parameters()); }

  std::vector<torch::Tensor> gathered(const std::vector<torch::Tensor>& params) override {
    return shards_.gathered(params, ctx_.group, s_.vocab);
  }

  int64_t full_numel() const override { return full_numel_; }

 private:
  // GPT-2 initialisation: N(0, 0.02) weights, residual projections scaled by
  // 1/sqrt(2·layers), zero biases, unit LayerNorm gains; from the model seed
  // only, on the parameters' device (CPU: the numbers of the CPU generator;
  // CUDA: of its Philox generator, the same on every GPU of one model).
  void init_weights(torch::Device device, uint64_t seed) {
    torch::NoGradGuard ng;
    auto gen = make_generator(device, seed);
    const double std = 0.02, proj_std = 0.02 / std::sqrt(2.0 * double(s_.layers));
    wte_.normal_(0, std, gen);
    wpe_.normal_(0, std, gen);
    for (auto& blk : blocks_) {
      blk->c_attn_w.normal_(0, std, gen);
      blk->attn_proj_w.normal_(0, proj_std, gen);
      blk->c_fc_w.normal_(0, std, gen);
      blk->mlp_proj_w.normal_(0, proj_std, gen);
    }
  }

  bool tp_on() const { return ctx_.size() > 1; }

  // The model on a tensor group from layer first on (forward_layers).
  torch::Tensor forward_tp(int64_t first, int64_t last, const torch::Tensor& x_in, const Batch& b) {
    torch::Tensor x = x_in;
    for (int64_t i = first; i < last; i++) {
      if (i == 0) {
        const auto T = b.input.size(1);
        // Sequence parallel: the embedding's sum is reduce-scattered along the
        // sequence; this rank adds the positions of its shard.
        const int64_t k = ctx_.sequence_parallel ? T / ctx_.size() : T;
        const int64_t at = ctx_.sequence_parallel ? int64_t(ctx_.rank()) * k : 0;
        x = tp::vocab_parallel_embedding(b.input, wte_, ctx_) + wpe_.narrow(0, at, k);
      } else if (i <= s_.layers) {
        x = blocks_[size_t(i - 1)]->forward_tp(x, ctx_);
      } else {
        x = block_layer_norm(x, ln_f_w_, ln_f_b_, 1e-5);
      }
    }
    return x;
  }

  // Keeps this rank's shards of the degree-1 weights init_weights drew (so
  // degree N starts from degree 1's model): c_attn by heads (q | k | v each),
  // c_fc by rows, the projections by columns, wte by vocabulary rows, padded
  // with zero rows to a multiple of the degree (Megatron pads the vocabulary
  // too; here the padding's logits are masked out of the loss, so the padded
  // model computes the unpadded one's loss and its padding rows stay zero).
  void shard_tensor_parallel(const ModelConfig& c) {
    torch::NoGradGuard ng;
    const int r = ctx_.rank(), n = ctx_.size();
    vocab_pad_ = tp::check_split(s_.heads, s_.seq_len, s_.vocab, ctx_,
                                 "gpt " + c.preset + " at hidden " + std::to_string(s_.hidden));
    using tp::Split;
    auto keep = [&](torch::Tensor& p, Split how, const torch::Tensor& shard) { shards_.keep(p, how, shard); };
    keep(wte_, Split::Vocab, tp::shard(tp::pad_rows(wte_.detach(), vocab_pad_), 0, r, n));
    for (auto& blk : blocks_) {
      keep(blk->c_attn_w, Split::QKV, tp::shard_qkv(blk->c_attn_w.detach(), r, n));
      keep(blk->c_attn_b, Split::QKV, tp::shard_qkv(blk->c_attn_b.detach(), r, n));
      keep(blk->attn_proj_w, Split::Columns, tp::shard(blk->attn_proj_w.detach(), 1, r, n));
      keep(blk->c_fc_w, Split::Rows, tp::shard(blk->c_fc_w.detach(), 0, r, n));
      keep(blk->c_fc_b, Split::Rows, tp::shard(blk->c_fc_b.detach(), 0, r, n));
      keep(blk->mlp_proj_w, Split::Columns, tp::shard(blk->mlp_proj_w.detach(), 1, r, n));
    }
  }

  GPTShape s_;
  bool checkpointing_;
  tp::Context ctx_;  // the tensor group (none: degree 1)
  int64_t vocab_pad_ = 0, full_numel_ = 0;
  std::shared_ptr<LinearCopies> copies_ = std::make_shared<LinearCopies>();  // linear_copies()
  tp::Shards shards_;  // this rank's shards (tp_on())
  torch::Tensor wte_, wpe_, ln_f_w_, ln_f_b_;
  std::vector<std::shared_ptr<BlockImpl>> blocks_;
};

// Tokens from a fixed random Markov chain: a random walk y_{t+1} = y_t + o_c mod A
// with four fixed offsets o drawn with probabilities 0.55/0.25/0.12/0.08, seen
// through a fixed random injection of the A = min(V, kActiveVocab) walk states
// into the vocabulary (token = perm[y]). Every token has four successors, the
// next-token entropy is 1.13 nats (the loss floor), and a whole [B, T+1] batch is
// a handful of device ops (cumsum, no host loop). Capping the active vocabulary
// lets a full-size model's loss fall within tens of steps (first towards ln A, as
// it learns which tokens occur) instead of needing thousands of steps to see
// each of 50257 tokens' successors; the logits still span the whole vocabulary.
// The chain is the same for every run; a sample depends on the seed, the step
// and its row of the global batch (RowRandom), so a data-parallel rank draws
// only its rows [rank*B, (rank+1)*B).
class MarkovTokens : public DataSource {
 public:
  static constexpr int64_t kActiveVocab = 4096;
  MarkovTokens(const ModelConfig& c, torch::Device dev, int64_t rank)
      : B_(c.micro_batch),
        T_(shape_of(c).seq_len),
        V_(std::min<int64_t>(shape_of(c).vocab, kActiveVocab)),
        dev_(dev),
        rows_(uint64_t(c.seed) * 1000003ULL + 1, rank * c.micro_batch, c.micro_batch, dev) {
    auto chain = at::detail::createCPUGenerator(0x6a09e667f3bcc908ULL);
    auto i64 = torch::TensorOptions().dtype(torch::kInt64);
    perm_ = torch::randperm(shape_of(c).vocab, chain, i64).narrow(0, 0, V_).to(dev);
    offsets_ = torch::randint(1, V_, {4}, chain, i64).to(dev);
    thresholds_ = torch::tensor({0.55, 0.80, 0.92}, torch::dtype(torch::kFloat32)).to(dev);
  }

  Batch next() override {
    torch::NoGradGuard ng;
    auto u = rows_.uniform(0, T_);
    auto choice = (u.unsqueeze(-1) > thresholds_).sum(-1);  // 0..3
    auto y0 = rows_.randint(1, 1, 0, V_);
    rows_.next_step();
    auto y = torch::cat({y0, y0 + offsets_.index_select(0, choice.view(-1)).view({B_, T_}).cumsum(1)},
                        1)
                 .remainder(V_);
    auto tokens = perm_.index_select(0, y.view(-1)).view({B_, T_ + 1});
    Batch b;
    b.input = tokens.narrow(1, 0, T_).contiguous();
    b.target = tokens.narrow(1, 1, T_).contiguous();
    return b;
  }

 private:
  int64_t B_, T_, V_;  // V_: walk states, the active vocabulary
  torch::Device dev_;
  torch::Tensor perm_, offsets_, thresholds_;
  RowRandom rows_;
};

}  // namespace

std::shared_ptr<Model> make_gpt_tp(const ModelConfig& c, torch::Device device,
                                   const tp::Context& ctx) {
  return std::make_shared<GPT>(c, device, ctx);
}

Family make_gpt_family() {
  Family f;
  f.describe = describe;
  f.build = [](const ModelConfig& c, torch::Device d) -> std::shared_ptr<Model> {
    return std::make_shared<GPT>(c, d);
  };
  f.data = [](const ModelConfig& c, torch::Device d, int64_t rank, int64_t) {
    return std::unique_ptr<DataSource>(new MarkovTokens(c, d, rank));
  };
  f.optimizer = OptimizerKind::AdamW;
  f.default_lr = 6e-4;
  f.presets = {"tiny", "124m", "350m", "774m", "1.5b"};
  return f;
}

}  // namespace cs
