// bert.cpp: BERT pre-training as Hugging Face BertForPreTraining builds it: the
// post-LayerNorm encoder, the MLM head (dense + GELU + LayerNorm, decoder tied
// to the word embeddings, output bias) and the NSP head (pooler + 2-way
// classifier); loss = MLM cross-entropy + NSP cross-entropy. Presets tiny (CPU),
// base (L12 H768 A12: 110,106,428 parameters) and large (L24 H1024 A16:
// 336,226,108). Dropout is 0 (the GPT family's choice too; the reference
// scripts set it to 0 as well).
//
// Pipeline layers: the embeddings, then each encoder layer; the heads run in
// loss() and their parameters belong to the last layer. The MLM head runs on
// the masked positions only (each sequence has the same number of them, so the
// gather has static shapes and needs no host sync); the loss equals the
// full-sequence head's with labels -100 elsewhere.
//
// With a tensor group (tp_model.h, docs/tensor-parallel.md) the same model is
// split Megatron-style over the group's ranks: the encoder layers' heads and
// MLP columns, the word embedding and the tied MLM decoder by vocabulary.
#include "bert.h"

#include <cmath>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "add_layer_norm.h"
#include "compat.h"
#include "device.h"
#include "linear_act.h"
#include "linear_casts.h"
#include "linear_ce.h"
#include "precision.h"
#include "row_random.h"
#include "tp_model.h"
#include "tp_shards.h"

namespace cs {
namespace {

struct BertSpec {
  std::string preset;
  int64_t layers = 12, hidden = 768, heads = 12, intermediate = 3072;
  int64_t vocab = 30522, positions = 512, types = 2;
  int64_t seq_len = 128, micro_batch = 1;
};

// Token ids of the synthetic vocabulary; ordinary tokens are [kFirstToken, vocab).
constexpr int64_t kCLS = 1, kSEP = 2, kMASK = 3, kFirstToken = 4;
constexpr double kInitStd = 0.02;      // HF initializer_range
constexpr double kLayerNormEps = 1e-12;  // HF layer_norm_eps

BertSpec resolve(const ModelConfig& cfg) {
  BertSpec s;
  s.preset = cfg.preset;
  if (s.preset == "tiny") {
    s.layers = 2, s.hidden = 128, s.heads = 2, s.intermediate = 512, s.vocab = 1024;
  } else if (s.preset == "base") {
    s.layers = 12, s.hidden = 768, s.heads = 12, s.intermediate = 3072;
  } else if (s.preset == "large") {
    s.layers = 24, s.hidden = 1024, s.heads = 16, s.intermediate = 4096;
  } else {
    throw ConfigError("preset: unknown bert preset \"" + cfg.preset +
                      "\"; use one of: tiny, base, large");
  }
  if (cfg.layers < 0 || cfg.hidden < 0)
    throw ConfigError("layers/hidden: must not be negative");
  if (cfg.layers > 0) s.layers = cfg.layers;
  if (cfg.hidden > 0) {
    if (cfg.hidden % s.heads != 0)
      throw ConfigError("hidden: " + std::to_string(cfg.hidden) + " is not a multiple of the " +
                        std::to_string(s.heads) + " attention heads of bert " + s.preset);
    s.hidden = cfg.hidden, s.intermediate = 4 * cfg.hidden;
  }
  if (cfg.seq_len != 0) {
    if (cfg.seq_len < 8 || cfg.seq_len > s.positions)
      throw ConfigError("seq_len: " + std::to_string(cfg.seq_len) +
                        " is out of range for bert (" + std::to_string(s.positions) +
                        " position embeddings); use 8.." + std::to_string(s.positions));
    s.seq_len = cfg.seq_len;
  }
  if (cfg.image_size != 0)
    throw ConfigError("image_size: bert takes token sequences; set seq_len instead");
  if (cfg.channels_last)
    throw ConfigError("channels_last: applies to resnet50 (convolutions) only; leave it false for bert");
  if (cfg.micro_batch < 1)
    throw ConfigError("micro_batch: must be at least 1, got " + std::to_string(cfg.micro_batch));
  s.micro_batch = cfg.micro_batch;
  return s;
}

// Masked positions per sequence: 15% of the sequence as in the original
// create_pretraining_data.py (round(0.15 T), at least 1); 19 at T=128, 77 at 512.
int64_t masked_per_sequence(int64_t seq_len) {
  return std::max<int64_t>(1, std::llround(0.15 * double(seq_len)));
}

int64_t count_params(const BertSpec& s) {
  const int64_t H = s.hidden, I = s.intermediate, V = s.vocab;
  int64_t emb = (V + s.positions + s.types) * H + 2 * H;
  int64_t layer = 4 * H * H + 4 * H      // q, k, v, attention output (+ biases)
                  + 2 * H                // attention LayerNorm
                  + 2 * H * I + I + H    // intermediate and output dense (+ biases)
                  + 2 * H;               // output LayerNorm
  int64_t pooler = H * H + H;
  int64_t mlm = H * H + H + 2 * H + V;   // transform dense, LayerNorm, decoder bias (tied weight)
  int64_t nsp = 2 * H + 2;
  return emb + s.layers * layer + pooler + mlm + nsp;
}

// Forward FLOPs of one sample (2 per multiply-accumulate): the encoder's dense
// layers 2T(4H^2 + 2HI) and attention scores and context 4T^2H per layer, the
// pooler and NSP classifier, and the MLM head on the k masked positions.
// Embedding lookups, LayerNorm, softmax and GELU are left out.
double forward_flops(const BertSpec& s) {
  const double H = s.hidden, I = s.intermediate, V = s.vocab, T = s.seq_len;
  const double k = masked_per_sequence(s.seq_len);
  double layer = 2 * T * (4 * H * H + 2 * H * I) + 4 * T * T * H;
  return s.layers * layer + 2 * H * H + 4 * H + k * (2 * H * H + 2 * H * V);
}

// The layers hold their parameters only, created on the target device (no
// host allocation, no libtorch default init, no copy): the names match Hugging
// Face's (layer0.attention_qkv.weight), as torch::nn's modules would give them.
// Bert::init draws the weights.
struct Dense : torch::nn::Module {
  torch::Tensor weight, bias;
  Dense(int64_t in, int64_t out, const torch::TensorOptions& o) {
    weight = register_parameter("weight", torch::empty({out, in}, o));
    bias = register_parameter("bias", torch::zeros({out}, o));
  }
  // x W^T + b through torch::linear, whose CUDA path adds the bias in the
  // matmul's epilogue for 2-D and contiguous 3-D inputs. (The C++ frontend's
  // Linear module calls torch::nn::functional::linear, which for 3-D inputs
  // runs a matmul and then a separate broadcast add of the bias: on BERT-large
  // at 512 tokens that add, in fp32 into bf16, was 16% of the step.)
  torch::Tensor forward(const torch::Tensor& x) { return torch::linear(x, weight, bias); }
  // act(x W^T + b) through linear_act: the encoder layers' bias gradients (and
  // the GELU's backward) in the engine's "lin" kernel where it runs.
  torch::Tensor forward_act(const torch::Tensor& x, Act act) {
    return linear_act(x, weight, bias, act);
  }
};

struct Embedding : torch::nn::Module {
  torch::Tensor weight;
  Embedding(int64_t n, int64_t dim, const torch::TensorOptions& o) {
    weight = register_parameter("weight", torch::empty({n, dim}, o));
  }
  torch::Tensor forward(const torch::Tensor& ids) { return torch::embedding(weight, ids); }
};

struct LayerNorm : torch::nn::Module {
  torch::Tensor weight, bias;
  LayerNorm(int64_t h, const torch::TensorOptions& o) {
    weight = register_parameter("weight", torch::ones({h}, o));
    bias = register_parameter("bias", torch::zeros({h}, o));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return torch::layer_norm(x, {weight.size(0)}, weight, bias, kLayerNormEps);
  }
};

// Under CUDA autocast the blocks' LayerNorms write the autocast dtype
// (block_layer_norm); add_layer_norm does the same with the residual add.
at::ScalarType norm_dtype() { return compat::autocast_dtype(c10::DeviceType::CUDA); }
bool fused_norms(const torch::Tensor& x, const torch::Tensor& delta) {
  return x.is_cuda() && compat::autocast_enabled(c10::DeviceType::CUDA) &&
         add_layer_norm_fused(x, delta, norm_dtype());
}

struct Embeddings : torch::nn::Module {
  std::shared_ptr<Embedding> word, position, token_type;
  std::shared_ptr<LayerNorm> norm;
  Embeddings(const BertSpec& s, const torch::TensorOptions& o) {
    word = register_module("word_embeddings", std::make_shared<Embedding>(s.vocab, s.hidden, o));
    position = register_module("position_embeddings",
                               std::make_shared<Embedding>(s.positions, s.hidden, o));
    token_type =
        register_module("token_type_embeddings", std::make_shared<Embedding>(s.types, s.hidden, o));
    norm = register_module("LayerNorm", std::make_shared<LayerNorm>(s.hidden, o));
  }
  // The output twice (add_layer_norm_twin): into the first layer's matrix
  // product and its residual.
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& ids, const torch::Tensor& types) {
    auto pos = torch::arange(ids.size(1), ids.options().dtype(torch::kLong));
    auto x = word->forward(ids) + position->forward(pos).unsqueeze(0);
    auto t = token_type->forward(types);
    if (fused_norms(x, t))
      return add_layer_norm_twin(x, t, norm->weight, norm->bias, kLayerNormEps, norm_dtype());
    auto y = block_layer_norm(x + t, norm->weight, norm->bias, kLayerNormEps);
    return {y, y};
  }
};

struct EncoderLayer : torch::nn::Module {
  std::shared_ptr<Dense> qkv, attn_out, intermediate, output;
  std::shared_ptr<LayerNorm> attn_norm, out_norm;
  int64_t heads;
  EncoderLayer(const BertSpec& s, const torch::TensorOptions& o) : heads(s.heads) {
    // q, k and v in one matmul: the same parameters as HF's three Linear layers.
    qkv = register_module("attention_qkv", std::make_shared<Dense>(s.hidden, 3 * s.hidden, o));
    attn_out = register_module("attention_output", std::make_shared<Dense>(s.hidden, s.hidden, o));
    attn_norm = register_module("attention_LayerNorm", std::make_shared<LayerNorm>(s.hidden, o));
    intermediate =
        register_module("intermediate", std::make_shared<Dense>(s.hidden, s.intermediate, o));
    output = register_module("output", std::make_shared<Dense>(s.intermediate, s.hidden, o));
    out_norm = register_module("output_LayerNorm", std::make_shared<LayerNorm>(s.hidden, o));
  }
  // The weights and biases its linear layers cast under autocast (LinearCasts).
  std::vector<torch::Tensor> linear_params() const {
    return {qkv->weight,          qkv->bias,          attn_out->weight, attn_out->bias,
            intermediate->weight, intermediate->bias, output->weight,   output->bias};
  }

  torch::Tensor forward(const torch::Tensor& x) { return forward_twin(x, x).first; }

  // x into the attention, x_res (the same values) into the residual add; the
  // output twice, for the next layer's attention and residual. Each LayerNorm
  // output feeds a matrix product and the next residual add: as twins
  // (add_layer_norm_twin) their two gradients are added in the LayerNorm's
  // backward kernel, not by autograd.
  std::pair<torch::Tensor, torch::Tensor> forward_twin(const torch::Tensor& x,
                                                       const torch::Tensor& x_res) {
    const int64_t B = x.size(0), T = x.size(1), H = x.size(2);
    auto qkv_ = linear_qkv(x, qkv->weight, qkv->bias, heads);
    auto ctx = compat::attention(qkv_[0], qkv_[1], qkv_[2])
                   .transpose(1, 2)
                   .reshape({B, T, H});
    if (x_res.is_cuda() &&
        linear_add_layer_norm_fused(x_res, ctx, attn_out->weight, norm_dtype())) {
      // The projections' bias gradients summed by the LayerNorms' backward
      // kernels too (add_layer_norm.h, "lnb").
      auto h = linear_add_layer_norm_twin(x_res, ctx, attn_out->weight, attn_out->bias,
                                          attn_norm->weight, attn_norm->bias, kLayerNormEps,
                                          norm_dtype());
      auto i = intermediate->forward_act(h.first, Act::GeluErf);
      return linear_add_layer_norm_twin(h.second, i, output->weight, output->bias, out_norm->weight,
                                        out_norm->bias, kLayerNormEps, norm_dtype());
    }
    auto a = attn_out->forward_act(ctx, Act::None);
    if (fused_norms(x_res, a)) {  // the residual adds inside the LayerNorm kernels
      auto h = add_layer_norm_twin(x_res, a, attn_norm->weight, attn_norm->bias, kLayerNormEps,
                                   norm_dtype());
      auto y = output->forward_act(intermediate->forward_act(h.first, Act::GeluErf), Act::None);
      return add_layer_norm_twin(h.second, y, out_norm->weight, out_norm->bias, kLayerNormEps,
                                 norm_dtype());
    }
    auto h = block_layer_norm(x_res + a, attn_norm->weight, attn_norm->bias, kLayerNormEps);
    auto y = output->forward_act(intermediate->forward_act(h, Act::GeluErf), Act::None);
    auto out = block_layer_norm(h + y, out_norm->weight, out_norm->bias, kLayerNormEps);
    return {out, out};
  }

  // The layer on a tensor group (c.size() > 1): this rank's heads of the
  // fused q | k | v (column-parallel, tp::shard_qkv), attention on them, the
  // row-parallel attention output (bias after the reduce), the post-LayerNorm
  // residual, the column-parallel intermediate with its GELU and the
  // row-parallel output. Under sequence parallelism x and the residual stream
  // are this rank's sequence shard [B, T/tp, H]: the LayerNorms run on it, the
  // all-gather enters each parallel region and the reduce-scatter leaves it.
  torch::Tensor forward_tp(const torch::Tensor& x, const tp::Context& c) {
    auto enter = [&](const torch::Tensor& t) {
      return c.sequence_parallel ? tp::gather_from_seq(t, c.group, 1) : tp::copy_to(t, c.group);
    };
    auto xin = enter(x);
    const int64_t B = xin.size(0), T = xin.size(1);
    auto qkv_ = linear_qkv(xin, qkv->weight, qkv->bias, heads / c.size());
    auto ctx = compat::attention(qkv_[0], qkv_[1], qkv_[2]).transpose(1, 2).reshape({B, T, -1});
    auto a = tp::row_parallel_linear(ctx, attn_out->weight, attn_out->bias, c);
    auto h = block_layer_norm(x + a, attn_norm->weight, attn_norm->bias, kLayerNormEps);
    auto i = linear_act(enter(h), intermediate->weight, intermediate->bias, Act::GeluErf);
    auto y = tp::row_parallel_linear(i, output->weight, output->bias, c);
    return block_layer_norm(h + y, out_norm->weight, out_norm->bias, kLayerNormEps);
  }
};

struct Heads : torch::nn::Module {
  std::shared_ptr<Dense> pooler, transform, nsp;
  std::shared_ptr<LayerNorm> transform_norm;
  torch::Tensor decoder_bias;
  Heads(const BertSpec& s, const torch::TensorOptions& o) {
    pooler = register_module("pooler", std::make_shared<Dense>(s.hidden, s.hidden, o));
    transform = register_module("predictions_transform", std::make_shared<Dense>(s.hidden, s.hidden, o));
    transform_norm =
        register_module("predictions_transform_LayerNorm", std::make_shared<LayerNorm>(s.hidden, o));
    decoder_bias = register_parameter("predictions_bias", torch::zeros({s.vocab}, o));
    nsp = register_module("seq_relationship", std::make_shared<Dense>(s.hidden, 2, o));
  }
};

class Bert : public Model, public TensorParallelModel, public LinearCopiesModel {
 public:
  // The parameters are created on device and drawn there from seed (init);
  // with a tensor group every rank then keeps its shards of them.
  Bert(const BertSpec& s, bool checkpointing, torch::Device device, uint64_t seed,
       const tp::Context& ctx = tp::Context())
      : spec_(s), checkpointing_(checkpointing), ctx_(ctx) {
    const auto o = torch::TensorOptions().device(device);
    embeddings_ = register_module("embeddings", std::make_shared<Embeddings>(s, o));
    for (int64_t i = 0; i < s.layers; ++i)
      layers_.push_back(register_module("layer" + std::to_string(i),
                                        std::make_shared<EncoderLayer>(s, o)));
    heads_ = register_module("heads", std::make_shared<Heads>(s, o));
    init(device, seed);
    for (const auto& p : parameters()) full_numel_ += p.numel();
    if (tp_on()) shard_tensor_parallel();
  }

  int64_t num_layers() const override { return spec_.layers + 1; }

  torch::Tensor forward_layers(int64_t first, int64_t last, const torch::Tensor& x,
                               const Batch& b) override {
    if (tp_on()) return forward_tp(first, last, x, b);
    torch::Tensor h = x;
    std::vector<torch::Tensor> lin;  // the range's linear layers, cast at once
    for (int64_t i = std::max<int64_t>(first, 1); i < last; ++i) {
      auto p = layers_[i - 1]->linear_params();
      lin.insert(lin.end(), p.begin(), p.end());
    }
    LinearCasts casts(lin, copies_.get());
    // h_res: h again, as the previous layer returned it for the next one's
    // residual (EncoderLayer::forward_twin); dropped where the range ends.
    torch::Tensor h_res = h;
    for (int64_t i = first; i < last; ++i) {
      if (i == 0) {
        std::tie(h, h_res) = embeddings_->forward(b.input, b.aux);
        continue;
      }
      EncoderLayer* l = layers_[i - 1].get();
      if (checkpointing_ && h.requires_grad()) {
        h = checkpoint([l](const torch::Tensor& t) { return l->forward(t); }, h);
        h_res = h;
      } else {
        std::tie(h, h_res) = l->forward_twin(h, h_res);
      }
    }
    return h;
  }

  torch::Tensor loss(const torch::Tensor& out, const Batch& b) override {
    if (tp_on()) return loss_tp(out, b);
    auto [t, labels] = masked_transform(out, b);
    // The decoder and its loss in one (linear_ce.h): the vocabulary padded to a
    // multiple of 64 for the products (30,522 columns of logits are not 16-byte
    // rows: cuBLAS falls back to slower kernels), the loss and its gradient
    // in one pass over the logits. Every label is a token: exactly k per sequence.
    auto mlm = linear_cross_entropy(t, embeddings_->word->weight, labels, 0, heads_->decoder_bias);
    return mlm + nsp_loss(out, b);
  }

  std::vector<torch::Tensor> layer_parameters(int64_t layer) override {
    if (layer == 0) return embeddings_->parameters();
    auto ps = layers_.at(layer - 1)->parameters();
    if (layer == spec_.layers) {
      auto hp = heads_->parameters();
      ps.insert(ps.end(), hp.begin(), hp.end());
    }
    return ps;
  }

  // The MLM decoder is the word embedding (layer 0): a pipeline keeps a copy on
  // the last stage and sums the two gradients.
  // The linear layers' casts its forward keeps (LinearCasts, kernels.h "adamc").
  std::shared_ptr<LinearCopies> linear_copies() override { return copies_; }

  std::vector<torch::Tensor> loss_parameters() override { return {embeddings_->word->weight}; }

  // HF's pre-training recipe: no weight decay for biases and LayerNorm weights;
  // embeddings decay.
  bool decays(const std::string& name) const override {
    return name.find("bias") == std::string::npos && name.find("LayerNorm") == std::string::npos;
  }

  // ---- TensorParallelModel ----
  bool tensor_sharded(const torch::Tensor& p) const override { return shards_.sharded(p); }

  // Under sequence parallelism the embeddings (positions, token types and
  // their LayerNorm) and every layer's LayerNorms and row-parallel biases see
  // this rank's sequence shard only. The heads run on the gathered sequence.
  std::vector<torch::Tensor> sequence_parallel_params() const override {
    std::vector<torch::Tensor> out{embeddings_->position->weight, embeddings_->token_type->weight,
                                   embeddings_->norm->weight, embeddings_->norm->bias};
    for (const auto& l : layers_)
      out.insert(out.end(), {l->attn_out->bias, l->attn_norm->weight, l->attn_norm->bias,
                             l->output->bias, l->out_norm->weight, l->out_norm->bias});
    return out;
  }

  std::vector<torch::Tensor> gathered_parameters() override { return gathered(parameters()); }

  std::vector<torch::Tensor> gathered(const std::vector<torch::Tensor>& params) override {
    return shards_.gathered(params, ctx_.group, spec_.vocab);
  }

  int64_t full_numel() const override { return full_numel_; }

 private:
  bool tp_on() const { return ctx_.size() > 1; }

  // The model on a tensor group from layer first on (forward_layers). The
  // embeddings: the vocabulary-parallel word embedding (its sum over the
  // ranks reduce-scattered along the sequence under sequence parallelism),
  // plus this rank's positions and token types, then the LayerNorm.
  torch::Tensor forward_tp(int64_t first, int64_t last, const torch::Tensor& x_in, const Batch& b) {
    torch::Tensor x = x_in;
    for (int64_t i = first; i < last; ++i) {
      if (i > 0) {
        x = layers_[size_t(i - 1)]->forward_tp(x, ctx_);
        continue;
      }
      const int64_t T = b.input.size(1);
      const int64_t k = ctx_.sequence_parallel ? T / ctx_.size() : T;
      const int64_t at = ctx_.sequence_parallel ? int64_t(ctx_.rank()) * k : 0;
      const auto& e = *embeddings_;
      auto w = tp::vocab_parallel_embedding(b.input, e.word->weight, ctx_) +
               e.position->weight.narrow(0, at, k).unsqueeze(0);
      auto t = e.token_type->forward(b.aux.narrow(1, at, k));
      x = block_layer_norm(w + t, e.norm->weight, e.norm->bias, kLayerNormEps);
    }
    return x;
  }

  // The heads on a tensor group: under sequence parallelism the encoder's
  // output is gathered along the sequence first (backward: this rank's shard
  // of the gradient, which every rank computes whole: the heads are
  // replicated). The MLM transform, its LayerNorm, the pooler and the NSP
  // classifier run replicated; the tied decoder gives this rank's vocabulary
  // columns of the logits (tp::parallel_lm_logits: backward all-reduces the
  // transform's gradient), plus its shard of the decoder bias, the padding's
  // columns masked out, into the vocabulary-parallel cross-entropy.
  torch::Tensor loss_tp(const torch::Tensor& out_in, const Batch& b) {
    auto out = out_in;
    if (ctx_.sequence_parallel)  // all-gather along the sequence; backward: split
      out = tp::gather_from(out.transpose(1, 2), ctx_.group).transpose(1, 2);
    auto [t, labels] = masked_transform(out, b);
    tp::Context head = ctx_;
    head.sequence_parallel = false;  // t is whole on every rank
    auto logits = tp::parallel_lm_logits(t, embeddings_->word->weight, head);
    logits = tp::mask_vocab_padding(logits + heads_->decoder_bias, vocab_pad_, ctx_);
    auto mlm = tp::vocab_parallel_cross_entropy(logits, labels, ctx_.group).mean();
    return mlm + nsp_loss(out, b);
  }

  // The MLM transform's output [B·k, H] at the masked positions of out [B,
  // T, H] and their labels [B·k]: exactly k per sequence (see BertData),
  // found without a host sync (labels there, -100 elsewhere).
  std::pair<torch::Tensor, torch::Tensor> masked_transform(const torch::Tensor& out, const Batch& b) {
    const int64_t B = out.size(0), T = out.size(1), H = out.size(2);
    const int64_t k = masked_per_sequence(T);
    auto pos = std::get<1>(torch::topk((b.target != -100).to(torch::kFloat), k, 1));
    auto hm = out.gather(1, pos.unsqueeze(-1).expand({B, k, H}));
    // LayerNorm in fp32 as CUDA autocast runs it (1.13's CPU autocast does not).
    auto t = heads_->transform_norm->forward(
        torch::gelu(heads_->transform->forward(hm)).to(torch::kFloat));
    return {t.reshape({B * k, H}), b.target.gather(1, pos).reshape(-1)};
  }

  // The NSP loss: the pooler on [CLS] (position 0) and the 2-way classifier.
  torch::Tensor nsp_loss(const torch::Tensor& out, const Batch& b) {
    auto pooled = torch::tanh(heads_->pooler->forward(out.select(1, 0)));
    return torch::nn::functional::cross_entropy(heads_->nsp->forward(pooled).to(torch::kFloat),
                                                b.aux_target);
  }

  // Keeps this rank's shards of the degree-1 weights init drew (so degree N
  // starts from degree 1's model): q | k | v by heads, the intermediate by
  // rows, the attention output and the output dense by columns, the word
  // embedding (the tied decoder) and the decoder bias by vocabulary, padded
  // with zeros to a multiple of the degree (30,522 splits over 2 but not 4 or
  // 8; the padding's logits are masked out of the loss, so the padded model
  // computes the unpadded one's loss and its padding stays zero).
  void shard_tensor_parallel() {
    torch::NoGradGuard ng;
    const int r = ctx_.rank(), n = ctx_.size();
    vocab_pad_ = tp::check_split(spec_.heads, spec_.seq_len, spec_.vocab, ctx_, "bert " + spec_.preset);
    using tp::Split;
    auto keep = [&](torch::Tensor& p, Split how, const torch::Tensor& shard) { shards_.keep(p, how, shard); };
    auto vocab = [&](const torch::Tensor& p) { return tp::shard(tp::pad_rows(p.detach(), vocab_pad_), 0, r, n); };
    keep(embeddings_->word->weight, Split::Vocab, vocab(embeddings_->word->weight));
    keep(heads_->decoder_bias, Split::Vocab, vocab(heads_->decoder_bias));
    for (auto& l : layers_) {
      keep(l->qkv->weight, Split::QKV, tp::shard_qkv(l->qkv->weight.detach(), r, n));
      keep(l->qkv->bias, Split::QKV, tp::shard_qkv(l->qkv->bias.detach(), r, n));
      keep(l->attn_out->weight, Split::Columns, tp::shard(l->attn_out->weight.detach(), 1, r, n));
      keep(l->intermediate->weight, Split::Rows, tp::shard(l->intermediate->weight.detach(), 0, r, n));
      keep(l->intermediate->bias, Split::Rows, tp::shard(l->intermediate->bias.detach(), 0, r, n));
      keep(l->output->weight, Split::Columns, tp::shard(l->output->weight.detach(), 1, r, n));
    }
  }

  // HF _init_weights: Linear and Embedding weights ~ N(0, 0.02), biases 0,
  // LayerNorm weight 1 and bias 0 (as created), the padding embedding (id 0)
  // zero. Drawn in module order from a generator of the model seed alone, on
  // the parameters' device (CPU: the CPU generator's numbers; CUDA: its
  // Philox numbers, the same on every GPU of one model).
  void init(torch::Device device, uint64_t seed) {
    torch::NoGradGuard ng;
    auto gen = make_generator(device, seed);
    for (auto& m : modules(/*include_self=*/false)) {
      if (auto* l = dynamic_cast<Dense*>(m.get()))
        l->weight.normal_(0, kInitStd, gen);
      else if (auto* e = dynamic_cast<Embedding*>(m.get()))
        e->weight.normal_(0, kInitStd, gen);
    }
    embeddings_->word->weight[0].zero_();
  }

  BertSpec spec_;
  bool checkpointing_;
  tp::Context ctx_;  // the tensor group (none: degree 1)
  int64_t vocab_pad_ = 0, full_numel_ = 0;
  std::shared_ptr<LinearCopies> copies_ = std::make_shared<LinearCopies>();  // linear_copies()
  tp::Shards shards_;  // this rank's shards (tp_on())
  std::shared_ptr<Embeddings> embeddings_;
  std::vector<std::shared_ptr<EncoderLayer>> layers_;
  std::shared_ptr<Heads> heads_;
};

at::Generator seeded_generator(torch::Device device, uint64_t seed) {
  at::Generator g = at::globalContext().defaultGenerator(device).clone();
  std::lock_guard<std::mutex> lock(g.mutex());
  g.set_current_seed(seed);
  return g;
}

// Masked sentence pairs from a seeded Markov chain. Every ordinary token has
// kSuccessors fixed successors (from the config seed, the same on every rank;
// Zipf-distributed over the vocabulary) taken with probabilities kSuccessorProbs, so a masked token is predictable
// from its neighbours. A pool of chains is generated once, the same on every
// rank (its size from the global batch); a sample is
// [CLS] A [SEP] B [SEP] where A is a chain segment and B either continues it
// (NSP label 0) or comes from another chain (label 1, half the samples).
// Exactly masked_per_sequence(T) ordinary positions are masked: 80% become
// [MASK], 10% a random token, 10% stay; labels are -100 elsewhere. A sample's
// draws depend on the seed, the step and its row of the global batch
// (RowRandom): a data-parallel rank draws only its own rows.
class BertData : public DataSource {
 public:
  BertData(const BertSpec& s, const ModelConfig& cfg, torch::Device device, int64_t rank,
           int64_t world_size)
      : spec_(s),
        device_(device),
        rows_(uint64_t(cfg.seed) * 0x9E3779B97F4A7C15ULL + 1, rank * s.micro_batch, s.micro_batch, device) {
    torch::NoGradGuard ng;
    const uint64_t seed = uint64_t(cfg.seed) * 0x9E3779B97F4A7C15ULL;
    at::Generator shared = seeded_generator(device, seed);
    // Zipf-like token frequencies (weight 1/rank), as in text: successors and
    // chain starts are drawn from them.
    auto zipf = 1.0 / torch::arange(1, s.vocab - kFirstToken + 1,
                                    torch::TensorOptions().dtype(torch::kFloat).device(device));
    auto succ = (at::multinomial(zipf, s.vocab * kSuccessors, true, shared) + kFirstToken)
                    .view({s.vocab, kSuccessors});
    auto probs = torch::tensor(std::vector<double>(kSuccessorProbs, kSuccessorProbs + kSuccessors),
                               torch::TensorOptions().dtype(torch::kFloat).device(device));
    at::Generator chains = seeded_generator(device, seed + 1);
    body_ = s.seq_len - 3;
    len_a_ = body_ / 2;
    chain_len_ = 2 * body_;
    const int64_t pool = std::max<int64_t>(kPoolChains, 4 * s.micro_batch * std::max<int64_t>(world_size, 1));
    std::vector<torch::Tensor> cols;
    auto cur = at::multinomial(zipf, pool, true, chains) + kFirstToken;
    cols.push_back(cur);
    auto flat = succ.reshape(-1);
    for (int64_t i = 1; i < chain_len_; ++i) {
      auto choice = at::multinomial(probs, pool, /*replacement=*/true, chains);
      cur = flat.index_select(0, cur * kSuccessors + choice);
      cols.push_back(cur);
    }
    pool_ = torch::stack(cols, 1);  // [pool, chain_len]
  }

  Batch next() override {
    torch::NoGradGuard ng;
    const int64_t B = spec_.micro_batch, T = spec_.seq_len, V = spec_.vocab;
    auto lopt = torch::TensorOptions().dtype(torch::kLong).device(device_);
    auto seg = segments(0, lopt);
    auto other = segments(2, lopt);
    auto nsp = (rows_.uniform(4, 1).view({B}) < 0.5).to(torch::kLong);  // 1: B is random
    auto a = seg.narrow(1, 0, len_a_);
    auto b = torch::where(nsp.unsqueeze(1).to(torch::kBool), other.narrow(1, len_a_, body_ - len_a_),
                          seg.narrow(1, len_a_, body_ - len_a_));
    auto col = [&](int64_t id) { return torch::full({B, 1}, id, lopt); };
    auto ids = torch::cat({col(kCLS), a, col(kSEP), b, col(kSEP)}, 1);
    auto types = torch::cat({torch::zeros({B, len_a_ + 2}, lopt),
                             torch::ones({B, T - len_a_ - 2}, lopt)}, 1);

    // Pick k ordinary positions per row: random scores, specials scored -1.
    const int64_t k = masked_per_sequence(T);
    auto score = rows_.uniform(5, T);
    score.index_fill_(1, torch::tensor({int64_t(0), len_a_ + 1, T - 1}, lopt), -1.0);
    auto pos = std::get<1>(torch::topk(score, k, 1));
    auto orig = ids.gather(1, pos);
    auto labels = torch::full({B, T}, -100, lopt).scatter_(1, pos, orig);
    auto r = rows_.uniform(6, k);
    auto random_tok = rows_.randint(7, k, kFirstToken, V);
    rows_.next_step();
    auto repl = torch::where(r < 0.8, torch::full_like(orig, kMASK),
                             torch::where(r < 0.9, random_tok, orig));
    ids.scatter_(1, pos, repl);
    return Batch{ids, labels, types, nsp};
  }

 private:
  // A random window of body_ tokens from the chain pool per row (RowRandom
  // streams stream and stream + 1).
  torch::Tensor segments(uint32_t stream, const torch::TensorOptions& lopt) {
    auto rows = rows_.randint(stream, 1, 0, pool_.size(0)).view(-1);
    auto off = rows_.randint(stream + 1, 1, 0, chain_len_ - body_ + 1);
    auto idx = off + torch::arange(body_, lopt).unsqueeze(0);
    return pool_.index_select(0, rows).gather(1, idx);
  }

  static constexpr int64_t kSuccessors = 4;
  static constexpr double kSuccessorProbs[kSuccessors] = {0.6, 0.25, 0.1, 0.05};
  static constexpr int64_t kPoolChains = 2048;
  BertSpec spec_;
  torch::Device device_;
  RowRandom rows_;
  torch::Tensor pool_;
  int64_t body_ = 0, len_a_ = 0, chain_len_ = 0;
};

Facts describe(const ModelConfig& cfg) {
  BertSpec s = resolve(cfg);
  Facts f;
  f.params = count_params(s);
  f.flops_per_sample = 3.0 * forward_flops(s);  // forward + backward (2x forward)
  f.tokens_per_sample = s.seq_len;
  f.shapes = {{"layers", s.layers},
              {"hidden", s.hidden},
              {"heads", s.heads},
              {"intermediate", s.intermediate},
              {"seq_len", s.seq_len},
              {"vocab", s.vocab},
              {"positions", s.positions},
              {"masked_per_sequence", masked_per_sequence(s.seq_len)},
              {"micro_batch", s.micro_batch}};
  return f;
}

}  // namespace

std::shared_ptr<Model> make_bert_tp(const ModelConfig& c, torch::Device device,
                                    const tp::Context& ctx) {
  return std::make_shared<Bert>(resolve(c), c.activation_checkpointing, device, uint64_t(c.seed),
                                ctx);
}

Family bert_family() {
  Family f;
  f.describe = describe;
  f.build = [](const ModelConfig& cfg, torch::Device device) -> std::shared_ptr<Model> {
    return std::make_shared<Bert>(resolve(cfg), cfg.activation_checkpointing, device,
                                  uint64_t(cfg.seed));
  };
  f.data = [](const ModelConfig& cfg, torch::Device device, int64_t rank,
              int64_t world_size) -> std::unique_ptr<DataSource> {
    return std::make_unique<BertData>(resolve(cfg), cfg, device, rank, world_size);
  };
  f.presets = {"tiny", "base", "large"};
  f.optimizer = OptimizerKind::AdamW;
  f.default_lr = 1e-4;  // BERT's published value; 1e-3 diverges for large without warm-up
  return f;
}

}  // namespace cs
