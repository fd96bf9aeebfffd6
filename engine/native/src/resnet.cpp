// resnet.cpp: ResNet-50 v1.5 exactly as torchvision.models.resnet50 builds it
// (bottleneck blocks, stride on the 3x3 conv, BatchNorm, 1000 classes:
// 25,557,032 parameters), a narrow shallow "tiny" preset for CPU, and
// synthetic learnable labelled images.
//
// Pipeline layers: the stem (conv 7x7, BN, ReLU, max-pool), then each
// bottleneck block, then the head (global average pool + fc): 18 layers for
// ResNet-50, 6 for tiny. Activation checkpointing wraps each block.
#include "resnet.h"

#include <cmath>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bn_relu.h"
#include "device.h"
#include "max_pool.h"
#include "resnet_fusion.h"
#include "row_random.h"
#include "stem_conv.h"

namespace cs {
namespace {

struct ResNetSpec {
  std::string preset;
  int64_t stem = 64;                 // stem width
  std::vector<int64_t> blocks;       // bottleneck blocks per stage
  std::vector<int64_t> planes;       // bottleneck width per stage (output is 4x)
  int64_t classes = 1000;
  int64_t image = 224;               // pixels per side
  int64_t micro_batch = 1;
};
constexpr int64_t kExpansion = 4;
constexpr int64_t kProtoSide = 8;    // resolution of the class patterns
constexpr double kNoiseStd = 1.0;    // per-pixel noise on top of the pattern (std 1)

ResNetSpec resolve(const ModelConfig& cfg) {
  ResNetSpec s;
  s.preset = cfg.preset.empty() ? "50" : cfg.preset;
  if (s.preset == "50") {
    s.stem = 64, s.blocks = {3, 4, 6, 3}, s.planes = {64, 128, 256, 512}, s.classes = 1000;
    s.image = 224;
  } else if (s.preset == "tiny") {
    s.stem = 8, s.blocks = {1, 1, 1, 1}, s.planes = {8, 16, 32, 64}, s.classes = 10;
    s.image = 32;
  } else {
    throw ConfigError("preset: unknown resnet50 preset \"" + cfg.preset +
                      "\"; use one of: 50, tiny");
  }
  if (cfg.layers != 0)
    throw ConfigError("layers: resnet50 has a fixed depth per preset; leave layers unset (0)");
  if (cfg.hidden != 0)
    throw ConfigError("hidden: resnet50 has fixed widths per preset; leave hidden unset (0)");
  if (cfg.seq_len != 0)
    throw ConfigError("seq_len: resnet50 takes images, not sequences; set image_size instead");
  if (cfg.image_size != 0) {
    if (cfg.image_size < 32 || cfg.image_size > 1024)
      throw ConfigError("image_size: " + std::to_string(cfg.image_size) +
                        " is out of range for resnet50; use 32..1024 pixels (224 is standard)");
    s.image = cfg.image_size;
  }
  if (cfg.micro_batch < 1)
    throw ConfigError("micro_batch: must be at least 1, got " + std::to_string(cfg.micro_batch));
  // Training-mode BatchNorm needs more than one value per channel in the last stage.
  int64_t last = s.image / 32;
  if (cfg.micro_batch * last * last < 2)
    throw ConfigError("micro_batch: 1 with image_size " + std::to_string(s.image) +
                      " leaves BatchNorm one value per channel; use micro_batch >= 2 or "
                      "image_size >= 64");
  s.micro_batch = cfg.micro_batch;
  return s;
}

int64_t conv_out(int64_t h, int64_t k, int64_t stride, int64_t pad) {
  return (h + 2 * pad - k) / stride + 1;
}

// Walks the network's convolutions and the fc analytically: parameters and
// multiply-accumulates of one forward pass at the spec's image size.
struct Count {
  int64_t params = 0;
  double macs = 0;
  void conv(int64_t cin, int64_t cout, int64_t k, int64_t hout) {
    params += cin * cout * k * k + 2 * cout;  // conv weight (no bias) + BatchNorm weight, bias
    macs += double(cin) * cout * k * k * hout * hout;
  }
};

Count count(const ResNetSpec& s) {
  Count c;
  int64_t h = conv_out(s.image, 7, 2, 3);
  c.conv(3, s.stem, 7, h);
  h = conv_out(h, 3, 2, 1);  // max-pool
  int64_t in = s.stem;
  for (size_t st = 0; st < s.blocks.size(); ++st) {
    for (int64_t b = 0; b < s.blocks[st]; ++b) {
      int64_t stride = (st > 0 && b == 0) ? 2 : 1, width = s.planes[st],
              out = width * kExpansion;
      int64_t ho = conv_out(h, 3, stride, 1);
      c.conv(in, width, 1, h);
      c.conv(width, width, 3, ho);
      c.conv(width, out, 1, ho);
      if (stride != 1 || in != out) c.conv(in, out, 1, ho);
      in = out, h = ho;
    }
  }
  c.params += in * s.classes + s.classes;
  c.macs += double(in) * s.classes;
  return c;
}

// One pipeline layer: a tensor-to-tensor module.
struct Layer : torch::nn::Module {
  virtual torch::Tensor forward(torch::Tensor x) = 0;
  // The same with the input given twice (x_res: the copy a residual block
  // adds back) and the output returned twice, so that where a block's output
  // feeds the next block twice its two gradients stay apart
  // (batch_norm_act_twin). Here: the input and output once.
  virtual std::pair<torch::Tensor, torch::Tensor> forward_twin(const torch::Tensor& x,
                                                               const torch::Tensor&) {
    auto y = forward(x);
    return {y, y};
  }
};

// A convolution without bias that holds only its weight, created on the
// target device: no host allocation, no
// libtorch default init, no copy. ResNet::init draws it.
struct Conv : torch::nn::Module {
  torch::Tensor weight;
  int64_t stride, pad;
  Conv(int64_t cin, int64_t cout, int64_t k, int64_t stride, int64_t pad,
       const torch::TensorOptions& o)
      : stride(stride), pad(pad) {
    weight = register_parameter("weight", torch::empty({cout, cin, k, k}, o));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return torch::conv2d(x, weight, {}, {stride, stride}, {pad, pad});
  }
};
using ConvPtr = std::shared_ptr<Conv>;
ConvPtr conv(int64_t cin, int64_t cout, int64_t k, int64_t stride, int64_t pad,
             const torch::TensorOptions& o) {
  return std::make_shared<Conv>(cin, cout, k, stride, pad, o);
}

// Batch norm as torch::nn builds it (weight 1, bias 0, running statistics),
// on the device.
torch::nn::BatchNorm2d batch_norm(int64_t c, const torch::Device& device) {
  torch::nn::BatchNorm2d m(c);
  m->to(device);
  return m;
}

struct Stem : Layer {
  ConvPtr conv1;
  torch::nn::BatchNorm2d bn1{nullptr};
  bool channels_last;
  Stem(int64_t width, bool cl, const torch::TensorOptions& o) : channels_last(cl) {
    conv1 = register_module("conv1", conv(3, width, 7, 2, 3, o));
    bn1 = register_module("bn1", batch_norm(width, o.device()));
  }
  torch::Tensor forward(torch::Tensor x) override {
    if (channels_last) x = x.contiguous(at::MemoryFormat::ChannelsLast);
    // One matrix product where the "stem" switch is on (stem_conv.h), else conv2d.
    x = stem_conv(x, conv1->weight, conv1->stride, conv1->pad);
    x = batch_norm_act(*bn1, x, torch::Tensor(), /*relu=*/true);
    return max_pool(x, 3, 2, 1);
  }
};

struct Bottleneck : Layer {
  ConvPtr conv1, conv2, conv3, down;
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr}, bn3{nullptr}, down_bn{nullptr};
  std::unique_ptr<BottleneckFusion> fusion;  // resnet.fusion cudnn (resnet_fusion.h)
  int64_t stride;
  Bottleneck(int64_t in, int64_t width, int64_t stride, const torch::TensorOptions& o,
             const std::string& name, bool fused)
      : stride(stride) {
    if (fused) fusion = std::make_unique<BottleneckFusion>(name);
    int64_t out = width * kExpansion;
    const auto dev = o.device();
    conv1 = register_module("conv1", conv(in, width, 1, 1, 0, o));
    bn1 = register_module("bn1", batch_norm(width, dev));
    conv2 = register_module("conv2", conv(width, width, 3, stride, 1, o));  // v1.5: stride here
    bn2 = register_module("bn2", batch_norm(width, dev));
    conv3 = register_module("conv3", conv(width, out, 1, 1, 0, o));
    bn3 = register_module("bn3", batch_norm(out, dev));
    if (stride != 1 || in != out) {
      down = register_module("downsample_conv", conv(in, out, 1, stride, 0, o));
      down_bn = register_module("downsample_bn", batch_norm(out, dev));
    }
  }
  // batch_norm_act: BatchNorm, the add and the ReLU in the engine's kernels
  // where they apply (bn_relu.h), else m(x).add_(identity).relu_().
  torch::Tensor forward(torch::Tensor x) override { return forward_twin(x, x).first; }
  // x into conv1, x_res (the same values) into the residual or downsample;
  // the output twice (an unused twin costs nothing).
  std::pair<torch::Tensor, torch::Tensor> forward_twin(const torch::Tensor& x,
                                                       const torch::Tensor& x_res) override {
    torch::Tensor identity =
        down ? batch_norm_act(*down_bn, down->forward(x_res), {}, /*relu=*/false) : x_res;
    std::pair<torch::Tensor, torch::Tensor> out;
    if (fusion && fusion->forward({conv1->weight, conv2->weight, conv3->weight, bn1.get(), bn2.get(),
                                   bn3.get(), stride},
                                  x, identity, &out))
      return out;
    torch::Tensor y = batch_norm_act(*bn1, conv1->forward(x), {}, true);
    y = batch_norm_act(*bn2, conv2->forward(y), {}, true);
    return batch_norm_act_twin(*bn3, conv3->forward(y), identity, true);
  }
};

struct Head : Layer {
  torch::Tensor weight, bias;  // the fc's, registered as fc.weight, fc.bias
  Head(int64_t in, int64_t classes, const torch::TensorOptions& o) {
    auto fc = register_module("fc", std::make_shared<torch::nn::Module>());
    weight = fc->register_parameter("weight", torch::empty({classes, in}, o));
    bias = fc->register_parameter("bias", torch::empty({classes}, o));
  }
  torch::Tensor forward(torch::Tensor x) override {
    return torch::linear(torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1), weight, bias);
  }
};

class ResNet : public Model {
 public:
  // The parameters are created on device and drawn there from the model seed (init).
  ResNet(const ResNetSpec& s, const ModelConfig& cfg, torch::Device device)
      : checkpointing_(cfg.activation_checkpointing) {
    auto o = torch::TensorOptions().device(device);
    add("stem", std::make_shared<Stem>(s.stem, cfg.channels_last, o), false);
    int64_t in = s.stem;
    for (size_t st = 0; st < s.blocks.size(); ++st) {
      for (int64_t b = 0; b < s.blocks[st]; ++b) {
        int64_t stride = (st > 0 && b == 0) ? 2 : 1;
        const std::string name = "layer" + std::to_string(st + 1) + "_" + std::to_string(b);
        add(name,
            std::make_shared<Bottleneck>(in, s.planes[st], stride, o, name,
                                         cfg.resnet_fusion == "cudnn"),
            true);
        in = s.planes[st] * kExpansion;
      }
    }
    head_ = std::make_shared<Head>(in, s.classes, o);
    add("head", head_, false);
    init(device, uint64_t(cfg.seed));
    // The same weights in the activations' layout (drawn in the default one,
    // so that both layouts start alike).
    if (cfg.channels_last) {
      torch::NoGradGuard ng;
      for (auto& p : parameters())
        if (p.dim() == 4) p.set_data(p.data().contiguous(at::MemoryFormat::ChannelsLast));
    }
  }

  int64_t num_layers() const override { return static_cast<int64_t>(layers_.size()); }

  torch::Tensor forward_layers(int64_t first, int64_t last, const torch::Tensor& x,
                               const Batch& b) override {
    // h_res: h again, as the previous block returned it for the next one's
    // residual (Layer::forward_twin); dropped where the range ends.
    torch::Tensor h = first == 0 ? b.input : x, h_res = h;
    for (int64_t i = first; i < last; ++i) {
      Layer* l = layers_[i].get();
      if (checkpointing_ && is_block_[i] && h.requires_grad()) {
        h = checkpoint([l](const torch::Tensor& t) { return l->forward(t); }, h);
        h_res = h;
      } else {
        std::tie(h, h_res) = l->forward_twin(h, h_res);
      }
    }
    return h;
  }

  torch::Tensor loss(const torch::Tensor& out, const Batch& b) override {
    return torch::nn::functional::cross_entropy(out.to(torch::kFloat), b.target);
  }

  std::vector<torch::Tensor> layer_parameters(int64_t layer) override {
    return layers_.at(layer)->parameters();
  }

  // torchvision's reference recipe applies weight decay to every parameter.
  bool decays(const std::string&) const override { return true; }

 private:
  void add(const std::string& name, std::shared_ptr<Layer> l, bool block) {
    layers_.push_back(register_module(name, l));
    is_block_.push_back(block);
  }
  // torchvision's init: Kaiming normal (fan_out, ReLU) for convolutions;
  // BatchNorm weight 1, bias 0 (as created); the fc as nn.Linear's default,
  // weight and bias U(-1/sqrt(in), 1/sqrt(in)) (Kaiming uniform with a = sqrt(5)).
  // Drawn in module order from a generator of the model seed alone, on the
  // parameters' device (the same on every GPU of one model).
  void init(torch::Device device, uint64_t seed) {
    torch::NoGradGuard ng;
    auto gen = make_generator(device, seed);
    for (auto& m : modules(/*include_self=*/false)) {
      if (auto* c = dynamic_cast<Conv*>(m.get())) {
        const auto& w = c->weight;
        const double fan_out = double(w.size(0) * w.size(2) * w.size(3));
        c->weight.normal_(0, std::sqrt(2.0 / fan_out), gen);
      }
    }
    const double bound = 1.0 / std::sqrt(double(head_->weight.size(1)));
    head_->weight.uniform_(-bound, bound, gen);
    head_->bias.uniform_(-bound, bound, gen);
  }

  std::vector<std::shared_ptr<Layer>> layers_;
  std::vector<bool> is_block_;
  std::shared_ptr<Head> head_;
  bool checkpointing_;
};

at::Generator seeded_generator(torch::Device device, uint64_t seed) {
  at::Generator g = at::globalContext().defaultGenerator(device).clone();
  std::lock_guard<std::mutex> lock(g.mutex());
  g.set_current_seed(seed);
  return g;
}

// Labelled images: each class has a fixed random low-resolution pattern
// (kProtoSide^2 x 3, from the config seed, the same on every rank), upsampled
// to the image size; a sample is its class's pattern plus Gaussian noise.
// Labels and noise depend on the seed, the step and the sample's row of the
// global batch (RowRandom): a data-parallel rank draws only its own rows.
class ImageData : public DataSource {
 public:
  ImageData(const ResNetSpec& s, const ModelConfig& cfg, torch::Device device, int64_t rank)
      : spec_(s),
        channels_last_(cfg.channels_last),
        device_(device),
        rows_(uint64_t(cfg.seed) * 0x9E3779B97F4A7C15ULL + 1, rank * s.micro_batch, s.micro_batch, device) {
    auto opts = torch::TensorOptions().dtype(torch::kFloat).device(device);
    at::Generator shared = seeded_generator(device, uint64_t(cfg.seed) * 0x9E3779B97F4A7C15ULL);
    protos_ = at::randn({s.classes, 3, kProtoSide, kProtoSide}, shared, opts);
  }

  Batch next() override {
    torch::NoGradGuard ng;
    int64_t n = spec_.micro_batch, side = spec_.image;
    torch::Tensor labels = rows_.randint(0, 1, 0, spec_.classes).view({n});
    torch::Tensor img = torch::nn::functional::interpolate(
        protos_.index_select(0, labels),
        torch::nn::functional::InterpolateFuncOptions()
            .size(std::vector<int64_t>{side, side})
            .mode(torch::kBilinear)
            .align_corners(false));
    img.add_(rows_.normal(1, 3 * side * side).view({n, 3, side, side}), kNoiseStd);
    rows_.next_step();
    if (channels_last_) img = img.contiguous(at::MemoryFormat::ChannelsLast);
    return Batch{img, labels, torch::Tensor(), torch::Tensor()};
  }

 private:
  ResNetSpec spec_;
  bool channels_last_;
  torch::Device device_;
  torch::Tensor protos_;
  RowRandom rows_;
};

Facts describe(const ModelConfig& cfg) {
  ResNetSpec s = resolve(cfg);
  Count c = count(s);
  Facts f;
  f.params = c.params;
  // Forward FLOPs = 2 x multiply-accumulates of the convolutions and the fc
  // (BatchNorm, ReLU, pooling and the residual adds are left out); training = 3x
  // forward. At 224 pixels this is 2 x 4.09 G MACs (torchvision's "GFLOPS").
  f.flops_per_sample = 3.0 * 2.0 * c.macs;
  f.tokens_per_sample = 0;
  int64_t blocks = 0;
  for (int64_t b : s.blocks) blocks += b;
  f.shapes = {{"layers", blocks + 2},        {"blocks", blocks},
              {"width", s.stem},             {"classes", s.classes},
              {"image_size", s.image},       {"micro_batch", s.micro_batch},
              {"forward_mmacs", int64_t(c.macs / 1e6)}};
  return f;
}

}  // namespace

Family resnet50_family() {
  Family f;
  f.describe = describe;
  f.build = [](const ModelConfig& cfg, torch::Device device) -> std::shared_ptr<Model> {
    ResNetSpec s = resolve(cfg);
    return std::make_shared<ResNet>(s, cfg, device);
  };
  f.data = [](const ModelConfig& cfg, torch::Device device, int64_t rank,
              int64_t /*world_size*/) -> std::unique_ptr<DataSource> {
    return std::make_unique<ImageData>(resolve(cfg), cfg, device, rank);
  };
  f.presets = {"tiny", "50"};
  f.optimizer = OptimizerKind::SGDMomentum;
  // cuDNN times its convolution algorithms for each shape on first use, as the
  // torchvision reference does (cudnn.benchmark; the trainer sets it,
  // cudnn_tuning.h); the shapes never change.
  f.convolutions = true;
  f.default_lr = 0.1;  // torchvision recipe (per 256 images); the trainer clips the gradient norm
  return f;
}

}  // namespace cs
