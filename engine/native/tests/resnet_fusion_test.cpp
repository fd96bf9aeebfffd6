// resnet_fusion_test.cpp: resnet.fusion cudnn (src/resnet_fusion.h,
// docs/resnet-fusion.md section 6).
// Everywhere: the knob's refusals (parse_config: a ConfigError naming
// resnet.fusion and the reason) for bf16, NCHW, CPU, another family,
// activation checkpointing, an unknown value, and a build without cuDNN's
// backend headers.
// On CUDA with the fused path built: one bottleneck block fused against the
// same block unfused in fp16 (the engine's bn kernels, cuDNN convolutions
// through ATen) on the same inputs, both against a float64 reference of the
// block: the fused block's error in the output, every gradient (input,
// residual, the three convolutions' weights, the three batch norms' weights
// and biases) and the running statistics must stay within twice the unfused
// fp16 block's error (the measured floor, as bn_relu_test.cpp holds the bn
// kernels) plus one fp16 rounding (2^-11) of the compared quantity. Then
// ResNet-50's tiny preset (64 pixels) trained three SGD steps fused and
// unfused in fp16 and in fp32 from three seeds on the same batches: at each
// step the fused losses' mean distance to fp32 over the seeds within three
// times the unfused fp16 losses' (each at least one fp16 rounding of the
// loss), every forward fused, and no block refused by cuDNN.
// conv3's weight gradient through ConvBNwgrad and bn2's backward with its ReLU
// mask recomputed (CASESTUDY_RESNET_FUSION_WGRAD=on) and through the apply
// kernel's recompute (off, the default): the block cases run both, the model
// case runs on, and
// bn_act_bwd_remask must equal the apply kernel's mask given to bn_act_bwd
// bit for bit. Everywhere: the variable's bad value refused by name.
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "bn_relu.h"
#include "config.h"
#include "cudnn_fusion.h"
#include "model.h"
#include "native_test.h"
#include "precision.h"
#include "resnet_fusion.h"

#ifdef CS_WITH_CUDNN_FUSION
#include "kernels_glue.h"
#endif

using namespace cs;

namespace {

// parse_config's verdict on a resnet50 config with the given fields: ""
// when accepted, else "config: " or "unsupported: " and the error's text.
std::string verdict(const std::string& fields) {
  const std::string doc = R"({"family":"resnet50","preset":"tiny","micro_batch":4,)" + fields + "}";
  try {
    parse_config(doc);
  } catch (const ConfigError& e) {
    return std::string("config: ") + e.what();
  } catch (const UnsupportedError& e) {
    return std::string("unsupported: ") + e.what();
  }
  return "";
}

int config_refusals() {
  const std::string ok = R"("device":"cuda","precision":"fp16","channels_last":true,"resnet":{"fusion":"cudnn"})";
  struct Case {
    std::string fields, want;
  } cases[] = {
      {R"("device":"cuda","precision":"bf16","channels_last":true,"resnet":{"fusion":"cudnn"})",
       "config: resnet.fusion cudnn: cuDNN's ConvBNfprop takes fp16 only on the H100 (docs/resnet-fusion.md)"},
      {R"("device":"cpu","precision":"fp16","channels_last":true,"resnet":{"fusion":"cudnn"})",
       "config: resnet.fusion cudnn: runs cuDNN's fused convolutions on CUDA only"},
      {R"("device":"cuda","precision":"fp16","resnet":{"fusion":"cudnn"})",
       "config: resnet.fusion cudnn: cuDNN's ConvBNfprop takes NHWC tensors only: set channels_last true"},
      {R"("device":"cuda","precision":"fp16","channels_last":true,"activation_checkpointing":true,"resnet":{"fusion":"cudnn"})",
       "unsupported: resnet.fusion cudnn: does not run under activation checkpointing"},
      {R"("device":"cuda","precision":"fp16","channels_last":true,"resnet":{"fusion":"fused"})", "config: resnet.fusion"},
      {R"("device":"cuda","precision":"fp16","channels_last":true,"resnet":{"fuse":"cudnn"})", "config: unknown config field \"resnet.fuse\""},
  };
  for (const auto& c : cases) {
    const std::string got = verdict(c.fields);
    if (got.find(c.want) == std::string::npos || got.find("resnet.fus") == std::string::npos) {
      std::cerr << "FAIL resnet.fusion refusal: " << c.fields << " gave \"" << got << "\", want \"" << c.want
                << "\"\n";
      return 1;
    }
  }
  // Another family.
  try {
    parse_config(R"({"family":"gpt","preset":"tiny","device":"cuda","precision":"fp16","resnet":{"fusion":"cudnn"}})");
    std::cerr << "FAIL resnet.fusion accepted for gpt\n";
    return 1;
  } catch (const ConfigError& e) {
    CS_CHECK(std::string(e.what()).find("family is gpt") != std::string::npos);
  }
  // Off, by default or by name: accepted anywhere.
  CS_CHECK(verdict(R"("device":"cpu","precision":"bf16")").empty());
  CS_CHECK(verdict(R"("device":"cpu","precision":"bf16","resnet":{"fusion":"off"})").empty());
  // The supported setting: accepted where the build has the fused path, else
  // refused with the build's reason.
  const std::string got = verdict(ok);
  if (cudnn_fusion_built()) {
    CS_CHECK(got.empty());
  } else {
    CS_CHECK(got == "unsupported: resnet.fusion cudnn: not in this build: " + cudnn_fusion_missing());
  }
  std::cout << "  resnet.fusion refusals ok (" << (cudnn_fusion_built() ? "fused path built" : got) << ")\n";
  return 0;
}

// Sets CASESTUDY_RESNET_FUSION_WGRAD for its lifetime (unset: nullptr), then
// restores it.
class WgradEnv {
 public:
  explicit WgradEnv(const char* v) {
    const char* old = std::getenv(kName);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (v)
      setenv(kName, v, 1);
    else
      unsetenv(kName);
  }
  ~WgradEnv() {
    if (had_)
      setenv(kName, old_.c_str(), 1);
    else
      unsetenv(kName);
  }

 private:
  static constexpr const char* kName = "CASESTUDY_RESNET_FUSION_WGRAD";
  bool had_ = false;
  std::string old_;
};

int wgrad_switch() {
  for (const char* v : {"", "off"}) {
    WgradEnv e(v);
    CS_CHECK(!resnet_fusion_wgrad_from_env());
  }
  {
    WgradEnv e(nullptr);
    CS_CHECK(!resnet_fusion_wgrad_from_env());
  }
  {
    WgradEnv e("on");
    CS_CHECK(resnet_fusion_wgrad_from_env());
  }
  WgradEnv e("yes");
  try {
    resnet_fusion_wgrad_from_env();
  } catch (const std::invalid_argument& err) {
    const std::string w = err.what();
    CS_CHECK(w.find("CASESTUDY_RESNET_FUSION_WGRAD") != std::string::npos && w.find("\"yes\"") != std::string::npos);
    std::cout << "  CASESTUDY_RESNET_FUSION_WGRAD: off by default, on, a bad value refused\n";
    return 0;
  }
  std::cerr << "FAIL CASESTUDY_RESNET_FUSION_WGRAD=yes accepted\n";
  return 1;
}

#ifdef CS_WITH_CUDNN_FUSION

constexpr auto kCL = at::MemoryFormat::ChannelsLast;

// bn_act_bwd_remask (the mask recomputed from x and the apply's coefficients)
// against bn_act_apply's mask given to bn_act_bwd: dx, dweight and dbias equal
// bit for bit. Inputs where x scale + shift is exactly 0 (x = 0 with shift 0,
// both sides must drop them) and a few NaNs (both keep them) included.
int remask_case(int64_t N, int64_t C, int64_t H, int64_t W, at::ScalarType t, const torch::Device& dev) {
  auto o = torch::TensorOptions().device(dev);
  torch::manual_seed(11);
  const int64_t M = N * H * W;
  auto x = torch::randn({N, C, H, W}, o);
  x.index_put_({torch::indexing::Slice(), torch::indexing::Slice(0, 8)}, 0.0);  // with shift 0 below: exactly 0
  auto flat = x.view(-1);
  flat.index_put_({torch::indexing::Slice(5, 40, 7)}, std::nan(""));
  x = x.to(t).contiguous(kCL);
  auto coef = torch::stack({torch::rand({C}, o) + 0.5, torch::rand({C}, o) - 0.5}).contiguous();
  coef.index_put_({1, torch::indexing::Slice(0, 8)}, 0.0);
  auto dy = torch::randn({N, C, H, W}, o).to(t).contiguous(kCL);
  auto w = torch::rand({C}, o) + 0.5, mean = torch::randn({C}, o) * 0.1, invstd = torch::rand({C}, o) + 0.5;
  const auto dt = glue::dtype(t);
  auto f32 = o.dtype(torch::kFloat32);
  auto a = torch::empty_like(x, kCL), dxa = torch::empty_like(x, kCL), dxb = torch::empty_like(x, kCL);
  auto mask = torch::empty({M * C / 8}, o.dtype(torch::kUInt8));
  auto dwa = torch::empty({C}, f32), dba = torch::empty({C}, f32), dwb = torch::empty({C}, f32),
       dbb = torch::empty({C}, f32);
  auto scratch = torch::empty({cuda::bn_act_bwd_scratch(M, C)}, f32);
  glue::check(cuda::bn_act_apply(x.data_ptr(), nullptr, coef.data_ptr<float>(), a.data_ptr(), mask.data_ptr<uint8_t>(),
                                 dt, M, C, true, glue::stream()),
              "remask test: apply");
  glue::check(cuda::bn_act_bwd(dy.data_ptr(), nullptr, mask.data_ptr<uint8_t>(), x.data_ptr(), w.data_ptr<float>(),
                               mean.data_ptr<float>(), invstd.data_ptr<float>(), dxa.data_ptr(), nullptr,
                               dwa.data_ptr<float>(), dba.data_ptr<float>(), scratch.data_ptr<float>(), dt, M, C, true,
                               glue::stream()),
              "remask test: bwd");
  glue::check(cuda::bn_act_bwd_remask(dy.data_ptr(), x.data_ptr(), coef.data_ptr<float>(), w.data_ptr<float>(),
                                      mean.data_ptr<float>(), invstd.data_ptr<float>(), dxb.data_ptr(),
                                      dwb.data_ptr<float>(), dbb.data_ptr<float>(), scratch.data_ptr<float>(), dt, M,
                                      C, glue::stream()),
              "remask test: remask");
  // A dropped element's gradient is 0 on both sides; NaN compares by bits.
  auto bits_equal = [](const torch::Tensor& p, const torch::Tensor& q) {
    auto pb = p.contiguous().view(p.scalar_type() == torch::kFloat32 ? torch::kInt32 : torch::kInt16);
    auto qb = q.contiguous().view(q.scalar_type() == torch::kFloat32 ? torch::kInt32 : torch::kInt16);
    return torch::equal(pb, qb);
  };
  const std::string what = std::to_string(N) + "x" + std::to_string(C) + "x" + std::to_string(H) + "x" +
                           std::to_string(W) + " " + c10::toString(t);
  // The mask must drop some elements and keep some, or the comparison says little.
  const double kept = a.gt(0).to(torch::kFloat64).mean().item<double>();
  CS_CHECK(kept > 0.2 && kept < 0.8);
  if (!bits_equal(dxa, dxb) || !bits_equal(dwa, dwb) || !bits_equal(dba, dbb)) {
    std::cerr << "FAIL bn_act_bwd_remask " << what << ": differs from the apply's mask (dx max diff "
              << (dxa.to(torch::kFloat32) - dxb.to(torch::kFloat32)).abs().nan_to_num(0).max().item<float>()
              << ", dweight " << (dwa - dwb).abs().nan_to_num(0).max().item<float>() << ")\n";
    return 1;
  }
  std::cout << "  bn_act_bwd_remask " << what << ": equal to the apply's mask, bit for bit\n";
  return 0;
}
constexpr double kHalfUnit = 1.0 / 2048;  // fp16's unit roundoff, 2^-11

struct BlockIn {
  int64_t N, in, width, H, stride;
  torch::Tensor x, identity, gy, w1, w2, w3;
  std::vector<torch::Tensor> bn_w, bn_b;
};

struct BlockOut {
  std::vector<std::pair<std::string, torch::Tensor>> t;  // compared tensors, by name
};

torch::nn::BatchNorm2d make_bn(const torch::Tensor& w, const torch::Tensor& b, const torch::Device& dev) {
  torch::nn::BatchNorm2d m(w.size(0));
  m->to(dev);
  m->train();
  torch::NoGradGuard ng;
  m->weight.copy_(w);
  m->bias.copy_(b);
  m->running_mean.fill_(0.25);
  m->running_var.fill_(2.0);
  return m;
}

// mode 0: fused fp16, 1: unfused fp16 (the engine's unfused path), 2: float64 reference.
BlockOut run_block(const BlockIn& in, int mode) {
  const auto dev = in.x.device();
  const auto dt = mode == 2 ? torch::kFloat64 : torch::kHalf;
  auto leaf = [&](const torch::Tensor& t) {
    return (mode == 2 ? t.to(torch::kFloat64) : t.clone(kCL)).detach().requires_grad_(true);
  };
  auto x = leaf(in.x), id = leaf(in.identity);
  auto master = [&](const torch::Tensor& w) {
    return (mode == 2 ? w.to(torch::kFloat64) : w.clone(kCL)).detach().requires_grad_(true);
  };
  auto w1 = master(in.w1), w2 = master(in.w2), w3 = master(in.w3);
  std::vector<torch::nn::BatchNorm2d> bns;
  std::vector<torch::Tensor> bw, bb, rm, rv;
  for (int i = 0; i < 3; ++i) {
    bns.push_back(make_bn(in.bn_w[i], in.bn_b[i], dev));
    if (mode == 2) {
      bw.push_back(in.bn_w[i].to(torch::kFloat64).requires_grad_(true));
      bb.push_back(in.bn_b[i].to(torch::kFloat64).requires_grad_(true));
      rm.push_back(bns[i]->running_mean.to(torch::kFloat64));
      rv.push_back(bns[i]->running_var.to(torch::kFloat64));
    }
  }
  torch::Tensor y;
  if (mode == 0) {
    BottleneckFusion f("test block");
    std::pair<torch::Tensor, torch::Tensor> out;
    TORCH_CHECK(f.forward({w1, w2, w3, bns[0].get(), bns[1].get(), bns[2].get(), in.stride}, x, id, &out),
                "the fused block did not run");
    y = out.first;
  } else if (mode == 1) {
    auto h = [&](const torch::Tensor& w) { return w.to(dt).contiguous(kCL); };
    auto t = batch_norm_act(*bns[0], torch::conv2d(x, h(w1)), {}, true);
    t = batch_norm_act(*bns[1], torch::conv2d(t, h(w2), {}, {in.stride, in.stride}, {1, 1}), {}, true);
    y = batch_norm_act_twin(*bns[2], torch::conv2d(t, h(w3)), id, true).first;
  } else {
    auto bn = [&](const torch::Tensor& t, int i) {
      return torch::batch_norm(t, bw[i], bb[i], rm[i], rv[i], true, 0.1, 1e-5, false);
    };
    auto t = torch::relu(bn(torch::conv2d(x, w1), 0));
    t = torch::relu(bn(torch::conv2d(t, w2, {}, {in.stride, in.stride}, {1, 1}), 1));
    y = torch::relu(bn(torch::conv2d(t, w3), 2) + id);
  }
  y.backward(in.gy.to(y.scalar_type()));
  BlockOut o;
  o.t = {{"y", y.detach()}, {"dx", x.grad()}, {"didentity", id.grad()}, {"dw1", w1.grad()},
         {"dw2", w2.grad()}, {"dw3", w3.grad()}};
  for (int i = 0; i < 3; ++i) {
    const std::string n = "bn" + std::to_string(i + 1);
    o.t.push_back({n + ".dweight", mode == 2 ? bw[i].grad() : bns[i]->weight.grad()});
    o.t.push_back({n + ".dbias", mode == 2 ? bb[i].grad() : bns[i]->bias.grad()});
    o.t.push_back({n + ".running_mean", mode == 2 ? rm[i] : bns[i]->running_mean});
    o.t.push_back({n + ".running_var", mode == 2 ? rv[i] : bns[i]->running_var});
  }
  return o;
}

int block_case(int64_t N, int64_t in_c, int64_t width, int64_t H, int64_t stride, const torch::Device& dev) {
  BlockIn b{N, in_c, width, H, stride};
  const int64_t out = width * 4, Ho = (H - 1) / stride + 1;
  auto o = torch::TensorOptions().device(dev);
  torch::manual_seed(7);
  b.x = torch::relu(torch::randn({N, in_c, H, H}, o)).to(torch::kHalf).contiguous(kCL);
  b.identity = torch::randn({N, out, Ho, Ho}, o).to(torch::kHalf).contiguous(kCL);
  b.gy = torch::randn({N, out, Ho, Ho}, o).to(torch::kHalf).contiguous(kCL);
  auto kaiming = [&](int64_t k, int64_t c, int64_t r) {
    return (torch::randn({k, c, r, r}, o) * std::sqrt(2.0 / double(k * r * r))).contiguous(kCL);
  };
  b.w1 = kaiming(width, in_c, 1);
  b.w2 = kaiming(width, width, 3);
  b.w3 = kaiming(out, width, 1);
  for (int64_t c : {width, width, out}) {
    b.bn_w.push_back(torch::rand({c}, o) + 0.5);
    b.bn_b.push_back(torch::rand({c}, o) - 0.5);
  }
  const BlockOut plain = run_block(b, 1), ref = run_block(b, 2);
  const std::string what = std::to_string(N) + "x" + std::to_string(in_c) + "x" + std::to_string(H) + "x" +
                           std::to_string(H) + " width " + std::to_string(width) + " stride " +
                           std::to_string(stride);
  for (const char* wgrad : {"on", "off"}) {
    const int64_t refused_before = BottleneckFusion::wgrad_refused(), wgrads_before = BottleneckFusion::fused_wgrads();
    BlockOut fused;
    {
      WgradEnv env(wgrad);
      fused = run_block(b, 0);
    }
    CS_CHECK(BottleneckFusion::wgrad_refused() == refused_before);
    // The block's one backward took the path its setting names.
    CS_CHECK(BottleneckFusion::fused_wgrads() - wgrads_before == (std::string(wgrad) == "on" ? 1 : 0));
    double worst = 0;
    for (size_t i = 0; i < ref.t.size(); ++i) {
      const auto& name = ref.t[i].first;
      const double ef = rel_err(fused.t[i].second, ref.t[i].second);
      const double eu = rel_err(plain.t[i].second, ref.t[i].second);
      const double bound = 2 * eu + kHalfUnit;
      worst = std::max(worst, ef / bound);
      if (!(ef <= bound)) {
        std::cerr << "FAIL fused block " << what << " (ConvBNwgrad " << wgrad << "): " << name << " error " << ef
                  << " against float64, unfused fp16 " << eu << " (bound " << bound << ")\n";
        return 1;
      }
    }
    std::cout << "  fused block " << what << " (ConvBNwgrad " << wgrad << "): " << ref.t.size()
              << " tensors within bound (worst " << worst << " of it)\n";
  }
  return 0;
}

// Three SGD steps of ResNet-50 tiny from each of kSeeds seeds: the losses,
// fused vs unfused fp16 vs fp32. One seed's fp16 trajectory is one draw (its
// distance to fp32 at a step varied 0.002-0.02 between runs, section 8 of
// docs/resnet-fusion.md): the bound is over the seeds, per step, the fused
// arm's mean distance to fp32 within three times the unfused fp16 arm's
// (each at least one fp16 rounding of the loss).
constexpr int kSeeds = 3, kSteps = 3;

// The losses of the three arms (fused, unfused fp16, fp32) at each step from seed.
int model_seed(const torch::Device& dev, int64_t seed, double (&loss)[kSteps][3], int64_t* blocks_out) {
  const Family& fam = family("resnet50");
  ModelConfig c;
  c.family = "resnet50";
  c.preset = "tiny";
  c.image_size = 64;
  c.seed = seed;
  c.micro_batch = 8;
  c.channels_last = true;
  std::vector<std::shared_ptr<Model>> models;
  const int64_t live_before = BottleneckFusion::live_blocks();
  for (const char* fusion : {"cudnn", "off", "off"}) {
    c.resnet_fusion = fusion;
    models.push_back(fam.build(c, dev));
    models.back()->train();
  }
  // Every block of the fused model runs fused at every step (a silent fallback
  // would leave the losses within their bound and fuse nothing).
  const int64_t blocks = BottleneckFusion::live_blocks() - live_before;
  CS_CHECK(blocks > 0);
  auto data = fam.data(c, dev, 0, 1);
  const int64_t refused_before = BottleneckFusion::refused(), fused_before = BottleneckFusion::fused_forwards(),
                wgrads_before = BottleneckFusion::fused_wgrads();
  for (int step = 0; step < kSteps; ++step) {
    const Batch b = data->next();
    for (int m = 0; m < 3; ++m) {
      torch::Tensor l;
      {
        std::unique_ptr<AutocastScope> ac;
        if (m < 2) ac = std::make_unique<AutocastScope>(dev, Precision::FP16);
        l = models[m]->forward_loss(b);
      }
      l.backward();
      loss[step][m] = l.item<double>();
      torch::NoGradGuard ng;
      for (auto& p : models[m]->parameters()) {
        if (!p.grad().defined()) continue;
        p.sub_(p.grad(), 0.05);
        p.grad().zero_();
      }
    }
    std::cout << "  tiny seed " << seed << " step " << step << ": loss fused " << loss[step][0] << ", unfused fp16 "
              << loss[step][1] << ", fp32 " << loss[step][2] << "\n";
  }
  CS_CHECK(BottleneckFusion::refused() == refused_before);
  CS_CHECK(BottleneckFusion::fused_forwards() - fused_before == kSteps * blocks);
  // Every block's every backward through ConvBNwgrad (model_case sets it on).
  CS_CHECK(BottleneckFusion::fused_wgrads() - wgrads_before == kSteps * blocks);
  *blocks_out = blocks;
  return 0;
}

int model_case(const torch::Device& dev) {
  double loss[kSeeds][kSteps][3];
  int64_t blocks = 0;
  WgradEnv env("on");  // the new path, whatever the caller's environment says
  for (int i = 0; i < kSeeds; ++i)
    if (int rc = model_seed(dev, 3 + i, loss[i], &blocks)) return rc;
  for (int step = 0; step < kSteps; ++step) {
    double fused = 0, unfused = 0;
    for (int i = 0; i < kSeeds; ++i) {
      const double* l = loss[i][step];
      const double floor = kHalfUnit * std::abs(l[2]);
      fused += std::max(std::abs(l[0] - l[2]), floor) / kSeeds;
      unfused += std::max(std::abs(l[1] - l[2]), floor) / kSeeds;
    }
    std::cout << "  tiny step " << step << " over " << kSeeds << " seeds: mean distance to fp32 fused " << fused
              << ", unfused fp16 " << unfused << "\n";
    if (!(fused <= 3 * unfused)) {
      std::cerr << "FAIL fused ResNet-50 tiny step " << step << ": mean distance to fp32 over " << kSeeds
                << " seeds " << fused << " fused, " << unfused << " unfused fp16 (bound " << 3 * unfused << ")\n";
      return 1;
    }
  }
  CS_CHECK(BottleneckFusion::wgrad_refused() == 0);
  std::cout << "  tiny: " << blocks << " blocks a model, every forward fused and every conv3 weight gradient "
            << "through ConvBNwgrad, " << kSeeds << " seeds x " << kSteps << " steps\n";
  return 0;
}

#endif

}  // namespace

int resnet_fusion_tests() {
  if (int rc = run_case("resnet_fusion", "config refusals", config_refusals)) return rc;
  if (int rc = run_case("resnet_fusion", "ConvBNwgrad switch", wgrad_switch)) return rc;
#ifdef CS_WITH_CUDNN_FUSION
  if (!torch::cuda::is_available()) {
    std::cout << "  resnet.fusion: no CUDA device\n";
    return 0;
  }
  const torch::Device dev(torch::kCUDA, 0);
  // bn2's shapes at 384 x 224 (stage 1 and 3), odd rows, bf16 too.
  if (int rc = run_case("resnet_fusion", "remask 1", [&] { return remask_case(384, 64, 56, 56, torch::kHalf, dev); }))
    return rc;
  if (int rc = run_case("resnet_fusion", "remask 2", [&] { return remask_case(384, 256, 14, 14, torch::kHalf, dev); }))
    return rc;
  if (int rc = run_case("resnet_fusion", "remask 3", [&] { return remask_case(7, 40, 47, 47, torch::kHalf, dev); }))
    return rc;
  if (int rc = run_case("resnet_fusion", "remask 4", [&] { return remask_case(5, 512, 7, 7, torch::kBFloat16, dev); }))
    return rc;
  // More than one wave of blocks whose stride 40 / 8 = 5 channel groups do not
  // divide: the apply kernel's moving-coefficients variant.
  if (int rc = run_case("resnet_fusion", "remask 5", [&] { return remask_case(32, 40, 47, 47, torch::kHalf, dev); }))
    return rc;
  // A stage-1 block (identity residual), a strided stage-2 first block, a stage-4 block.
  if (int rc = run_case("resnet_fusion", "block 1", [&] { return block_case(16, 256, 64, 56, 1, dev); })) return rc;
  if (int rc = run_case("resnet_fusion", "block 2", [&] { return block_case(16, 256, 128, 56, 2, dev); })) return rc;
  if (int rc = run_case("resnet_fusion", "block 3", [&] { return block_case(32, 2048, 512, 7, 1, dev); })) return rc;
  if (int rc = run_case("resnet_fusion", "model", [&] { return model_case(dev); })) return rc;
  for (const auto& p : fused_conv_plans()) std::cout << "  plan " << p << "\n";
#else
  std::cout << "  resnet.fusion: not in this build (" << cudnn_fusion_missing() << ")\n";
#endif
  return 0;
}
