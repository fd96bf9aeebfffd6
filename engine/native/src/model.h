// model.h: what a model family gives the engine core. Each family (gpt.cpp,
// bert.cpp, resnet.cpp) registers itself in families.cpp; the trainer, the data
// parallel reducer and the pipeline schedules only speak this interface.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>

namespace cs {

// Thrown for a bad config value: becomes CS_ERR_CONFIG at the ABI.
struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// Thrown for a knob that cannot be honoured here: becomes CS_ERR_UNSUPPORTED.
struct UnsupportedError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The model part of the engine config (see engine/config.go).
struct ModelConfig {
  std::string family, preset;
  int64_t layers = 0, hidden = 0;  // 0: the preset's
  int64_t micro_batch = 1;
  int64_t seq_len = 0;     // gpt, bert; 0: the preset's
  int64_t image_size = 0;  // resnet50; 0: 224 (tiny: 32)
  bool activation_checkpointing = false;
  bool channels_last = false;
  std::string resnet_fusion;  // resnet.fusion: "" / off, or cudnn (resnet_fusion.h)
  int64_t seed = 0;
};

// One micro-batch, already on the device.
//   gpt:      input = token ids [B,T], target = next tokens [B,T]
//   bert:     input = token ids [B,T], target = MLM labels [B,T] (-100 = not masked),
//             aux = token type ids [B,T], aux_target = next-sentence labels [B]
//   resnet50: input = images [B,3,H,W] (channels_last when asked), target = labels [B]
struct Batch {
  torch::Tensor input, target, aux, aux_target;
};

// Static facts, computable without building the model.
struct Facts {
  int64_t params = 0;
  double flops_per_sample = 0;  // training FLOPs (forward + backward) of one sample
  int64_t tokens_per_sample = 0;  // 0 for images
  std::map<std::string, int64_t> shapes;  // layers, hidden, heads, seq_len, vocab, ...
};

// A model is a chain of layers so that pipeline parallelism can cut it between
// any two of them. Layer 0 consumes the batch inputs (embeddings / stem); the
// last layer's output goes to loss().
class Model : public torch::nn::Module {
 public:
  virtual int64_t num_layers() const = 0;
  // Runs layers [first, last). When first == 0, x is undefined and the layer
  // reads the batch inputs instead.
  virtual torch::Tensor forward_layers(int64_t first, int64_t last, const torch::Tensor& x,
                                       const Batch& b) = 0;
  // Scalar loss (mean over the micro-batch) from the last layer's output.
  virtual torch::Tensor loss(const torch::Tensor& out, const Batch& b) = 0;
  // Parameters owned by one layer (for pipeline stages and balancing).
  virtual std::vector<torch::Tensor> layer_parameters(int64_t layer) = 0;
  // Parameters loss() reads that a layer owns (an output head tied to the
  // embedding). A pipeline keeps a copy on the last stage and sums its gradient
  // with the owning stage's (pipeline.cpp).
  virtual std::vector<torch::Tensor> loss_parameters() { return {}; }
  // Parameters with weight decay (AdamW) vs. without (biases, norms, embeddings per family).
  virtual bool decays(const std::string& param_name) const {
    return param_name.find("bias") == std::string::npos &&
           param_name.find("norm") == std::string::npos && param_name.find("ln") == std::string::npos;
  }
  torch::Tensor forward_loss(const Batch& b) {
    return loss(forward_layers(0, num_layers(), torch::Tensor(), b), b);
  }
};

// Synthetic, learnable data from a fixed seed; batches are made on the device.
// Every random draw is keyed by (seed, step, row of the global batch)
// (row_random.h), so data parallel rank r of R with micro-batch b generates
// only rows [r*b, (r+1)*b) of the global batch, equal to the rows a single
// rank with batch R*b draws (DistributedSampler semantics). Every Batch tensor
// has the sample as dim 0.
class DataSource {
 public:
  virtual ~DataSource() = default;
  virtual Batch next() = 0;
};

// The optimizer a family trains with.
enum class OptimizerKind { AdamW, SGDMomentum };

struct Family {
  std::function<Facts(const ModelConfig&)> describe;  // analytic, no allocation
  // fp32 parameters initialised from the seed (the global generators are seeded
  // with it), on the device where that saves a host pass and a copy (the
  // trainer moves whatever is still on the CPU).
  std::function<std::shared_ptr<Model>(const ModelConfig&, torch::Device)> build;
  // The source of rank `rank` of `world_size` with the config's micro_batch
  // per rank: rows [rank*b, (rank+1)*b) of the global batch of world_size*b.
  std::function<std::unique_ptr<DataSource>(const ModelConfig&, torch::Device, int64_t rank,
                                            int64_t world_size)>
      data;
  OptimizerKind optimizer = OptimizerKind::AdamW;
  double default_lr = 3e-4;
  bool convolutions = false;  // cuDNN autotuning applies (cudnn_tuning.h)
  std::vector<std::string> presets;  // for listings (cs_models), in display order
};

// The family registry (families.cpp). Throws ConfigError for an unknown name.
const Family& family(const std::string& name);
std::vector<std::string> family_names();

// Activation checkpointing (checkpoint.cpp): runs fn without keeping its
// activations and recomputes it during backward.
torch::Tensor checkpoint(const std::function<torch::Tensor(const torch::Tensor&)>& fn,
                         const torch::Tensor& x);

}  // namespace cs
