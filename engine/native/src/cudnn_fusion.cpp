// cudnn_fusion.cpp: see cudnn_fusion.h. The graph is the probe's
// (engine/native/tools/cudnn_fusion/probe.cu, measured on an H100 with cuDNN
// 9.19: docs/resnet-fusion.md section 5), built through the one shared layer
// over cuDNN's backend API, cudnn_fusion_graph.h.
#include "cudnn_fusion.h"

#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <tuple>

#ifdef CS_WITH_CUDNN_FUSION
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include "cudnn_fusion_graph.h"
#endif

namespace cs {

bool FusedConvShape::operator<(const FusedConvShape& o) const {
  return std::tie(N, C, H, W, K, R, stride, prologue, wgrad) <
         std::tie(o.N, o.C, o.H, o.W, o.K, o.R, o.stride, o.prologue, o.wgrad);
}

std::string FusedConvShape::str() const {
  std::ostringstream s;
  s << (prologue ? "scale-bias-relu + " : "") << R << "x" << R << " conv " << C << "->" << K
    << " stride " << stride << " on " << N << "x" << H << "x" << W << (wgrad ? ": weight gradient" : " + genstats");
  return s.str();
}

#ifndef CS_WITH_CUDNN_FUSION

bool cudnn_fusion_built() { return false; }

std::string cudnn_fusion_missing() {
#ifndef CS_WITH_KERNELS
  return "this engine was built without its CUDA kernels (a CPU build, or no nvcc at build time)";
#else
  return "cuDNN 9's backend headers (cudnn_graph.h) were not found when the engine was built "
         "(CMake looks in torch's nvidia-cudnn wheel, CUDNN_ROOT, CUDNN_INCLUDE and the system)";
#endif
}

void fused_conv_prepare(const FusedConvShape&, const torch::Device&) {
  throw std::runtime_error("resnet.fusion: " + cudnn_fusion_missing());
}

std::pair<torch::Tensor, torch::Tensor> fused_conv_genstats(const torch::Tensor&, const torch::Tensor&,
                                                            const torch::Tensor&, int64_t) {
  throw std::runtime_error("resnet.fusion: " + cudnn_fusion_missing());
}

torch::Tensor fused_conv_wgrad(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&, int64_t, int64_t) {
  throw std::runtime_error("resnet.fusion: " + cudnn_fusion_missing());
}

std::vector<std::string> fused_conv_plans() { return {}; }

#else

namespace fe = cudnnfe;

bool cudnn_fusion_built() { return true; }
std::string cudnn_fusion_missing() { return ""; }

namespace {

// Tensor uids of the graph (the probe's layout).
// (A weight gradient's graph: kX, kY for dy, kW for dw, kScale, kBias.)
enum : int64_t { kX = 1, kW = 2, kY = 3, kSum = 4, kSqSum = 5, kScale = 6, kBias = 7, kVirtual = 8 };

struct Entry {
  std::shared_ptr<fe::Graph> graph;
  std::shared_ptr<fe::Plan> plan;
  cudnnHandle_t handle = nullptr;
  std::string intermediates;  // the prologue's virtual tensors' type
};

struct Cache {
  std::mutex mu;
  std::map<int, cudnnHandle_t> handles;                        // per device
  std::map<std::pair<int, FusedConvShape>, std::shared_ptr<Entry>> plans;
};
Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: handles outlive static teardown order
  return *c;
}

cudnnHandle_t handle_locked(Cache& c, int device) {
  auto it = c.handles.find(device);
  if (it != c.handles.end()) return it->second;
  cudnnHandle_t h = nullptr;
  CK(cudnnCreate(&h));
  c.handles[device] = h;
  return h;
}

bool capturing(cudaStream_t s) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(s, &st) == cudaSuccess && st != cudaStreamCaptureStatusNone;
}

// The graph of s with the prologue's intermediates of type inter: ConvBNfprop
// (conv + GenStats) or ConvBNwgrad.
void build_graph(fe::Graph& g, const FusedConvShape& s, cudnnDataType_t inter) {
  const cudnnDataType_t half = CUDNN_DATA_HALF, f32 = CUDNN_DATA_FLOAT;
  auto& X = g.tensor(kX, half, s.N, s.C, s.H, s.W, false);
  auto& W = g.tensor(kW, half, s.K, s.C, s.R, s.R, false);
  auto& Y = g.tensor(kY, half, s.N, s.K, s.Ho(), s.Wo(), false);
  const fe::Desc& in = s.prologue ? g.scale_bias_relu(X, kScale, kVirtual, half, inter, s.N, s.C, s.H, s.W) : X;
  if (s.wgrad) {
    g.conv_wgrad(in, Y, W, s.R / 2, s.stride);
  } else {
    auto& SUM = g.tensor(kSum, f32, 1, s.K, 1, 1, false);
    auto& SQ = g.tensor(kSqSum, f32, 1, s.K, 1, 1, false);
    g.conv_fwd(in, W, Y, s.R / 2, s.stride);
    g.genstats(Y, SUM, SQ, f32);
  }
  g.finalize();
}

// The first plan heuristic A (then FALLBACK) proposes that finalizes; for a
// weight gradient the first that is also deterministic (cuDNN's numerical
// notes: split reductions may not be, and docs/resnet-fusion.md section 8 saw
// eager and graphed runs part on plans timing had picked), else its first.
// (The forward graphs keep the first plan, as validated on the H100; the
// listing says whether it carries the nondeterministic note.) The prologue's
// intermediates in fp32, else (a weight gradient's: NVIDIA's ConvBNwgrad
// sample declares them fp16) in fp16.
std::shared_ptr<Entry> build(const FusedConvShape& s, cudnnHandle_t h) {
  std::string why;
  std::shared_ptr<Entry> nondeterministic;
  std::vector<cudnnDataType_t> inters{CUDNN_DATA_FLOAT};
  if (s.wgrad && s.prologue) inters.push_back(CUDNN_DATA_HALF);
  for (auto inter : inters) {
    auto e = std::make_shared<Entry>();
    e->handle = h;
    e->graph = std::make_shared<fe::Graph>(h);
    e->intermediates = inter == CUDNN_DATA_FLOAT ? "fp32" : "fp16";
    try {
      build_graph(*e->graph, s, inter);
    } catch (const fe::CudnnError& err) {
      why = err.what();
      continue;
    }
    for (auto mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
      std::vector<fe::DescP> cfgs;
      try {
        cfgs = fe::engine_configs(*e->graph, mode);
      } catch (const fe::CudnnError& err) {  // this heuristic refused the graph: the next one
        why = err.what();
        continue;
      }
      for (auto& cfg : cfgs) {
        auto plan = fe::make_plan(*e->graph, cfg, &why);
        if (!plan) continue;
        plan->mode = mode == CUDNN_HEUR_MODE_A ? "A" : "fallback";
        if (plan->nondeterministic && s.wgrad) {
          if (!nondeterministic) {  // e's graph shared: the plans of one graph
            nondeterministic = std::make_shared<Entry>(*e);
            nondeterministic->plan = plan;
          }
          continue;
        }
        e->plan = plan;
        return e;
      }
    }
  }
  if (nondeterministic) return nondeterministic;
  throw std::runtime_error("resnet.fusion: cuDNN has no engine for " + s.str() +
                           (why.empty() ? std::string(" (no engine config proposed)") : " (last refusal: " + why + ")"));
}

std::shared_ptr<Entry> entry(const FusedConvShape& s, int device, cudaStream_t stream) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto key = std::make_pair(device, s);
  auto it = c.plans.find(key);
  if (it != c.plans.end()) return it->second;
  if (capturing(stream))
    throw std::runtime_error("resnet.fusion: the cuDNN plan for " + s.str() +
                             " would be built inside CUDA graph capture; run an eager step first");
  auto e = build(s, handle_locked(c, device));
  c.plans[key] = e;
  return e;
}

// x: CUDA fp16 channels_last 4-d; scale_bias: undefined, or fp16 [2, C].
void check_inputs(const char* what, const torch::Tensor& x, const torch::Tensor& scale_bias) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kHalf && x.dim() == 4 &&
                  x.is_contiguous(at::MemoryFormat::ChannelsLast),
              what, ": x must be CUDA fp16 channels_last");
  TORCH_CHECK(!scale_bias.defined() || (scale_bias.scalar_type() == torch::kHalf && scale_bias.is_contiguous() &&
                                        scale_bias.numel() == 2 * x.size(1)),
              what, ": scale_bias must be fp16 [2, C]");
}

// Runs e's plan on the current stream with the tensors uids -> ptrs and, with
// a prologue, its scale and bias (the halves of scale_bias); the workspace
// from torch's allocator.
void run_plan(const char* what, const Entry& e, std::vector<int64_t> uids, std::vector<void*> ptrs,
              const torch::Tensor& scale_bias, const torch::Tensor& x, cudaStream_t stream) {
  if (scale_bias.defined()) {
    uids.insert(uids.end(), {kScale, kBias});
    auto* sb = static_cast<at::Half*>(scale_bias.data_ptr());
    ptrs.insert(ptrs.end(), {static_cast<void*>(sb), static_cast<void*>(sb + x.size(1))});
  }
  for (void* p : ptrs)
    TORCH_CHECK(reinterpret_cast<uintptr_t>(p) % 16 == 0, what, ": a tensor is not 16-byte aligned");
  auto ws = torch::empty({std::max<int64_t>(e.plan->workspace, 1)}, x.options().dtype(torch::kUInt8));
  auto pack = fe::variant_pack(uids, ptrs, ws.data_ptr());
  CK(cudnnSetStream(e.handle, stream));
  fe::execute(e.handle, *e.plan, *pack);
}

}  // namespace

void fused_conv_prepare(const FusedConvShape& s, const torch::Device& device) {
  TORCH_CHECK(device.is_cuda(), "resnet.fusion: CUDA only");
  c10::cuda::CUDAGuard guard(device);
  entry(s, device.index(), c10::cuda::getCurrentCUDAStream().stream());
}

std::pair<torch::Tensor, torch::Tensor> fused_conv_genstats(const torch::Tensor& x,
                                                            const torch::Tensor& w,
                                                            const torch::Tensor& scale_bias,
                                                            int64_t stride) {
  const auto cl = at::MemoryFormat::ChannelsLast;
  check_inputs("fused conv", x, scale_bias);
  TORCH_CHECK(w.is_cuda() && w.scalar_type() == torch::kHalf && w.dim() == 4 && w.is_contiguous(cl) &&
                  w.size(1) == x.size(1) && w.size(2) == w.size(3),
              "fused conv: w must be CUDA fp16 channels_last [K, C, R, R]");
  const FusedConvShape s{x.size(0), x.size(1), x.size(2), x.size(3), w.size(0), w.size(2), stride,
                         scale_bias.defined()};
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  auto e = entry(s, x.get_device(), stream);
  auto y = torch::empty({s.N, s.K, s.Ho(), s.Wo()}, x.options().memory_format(cl));
  auto sums = torch::empty({2, s.K}, x.options().dtype(torch::kFloat32));  // GenStats overwrites
  run_plan("fused conv", *e, {kX, kW, kY, kSum, kSqSum},
           {x.data_ptr(), w.data_ptr(), y.data_ptr(), sums.data_ptr<float>(), sums.data_ptr<float>() + s.K},
           scale_bias, x, stream);
  return {y, sums};
}

torch::Tensor fused_conv_wgrad(const torch::Tensor& x, const torch::Tensor& dy, const torch::Tensor& scale_bias,
                               int64_t R, int64_t stride) {
  const auto cl = at::MemoryFormat::ChannelsLast;
  check_inputs("fused wgrad", x, scale_bias);
  TORCH_CHECK(dy.is_cuda() && dy.scalar_type() == torch::kHalf && dy.dim() == 4 && dy.is_contiguous(cl),
              "fused wgrad: dy must be CUDA fp16 channels_last [N, K, Ho, Wo]");
  const FusedConvShape s{x.size(0), x.size(1), x.size(2), x.size(3), dy.size(1), R, stride, scale_bias.defined(),
                         true};
  TORCH_CHECK(dy.size(0) == s.N && dy.size(2) == s.Ho() && dy.size(3) == s.Wo(),
              "fused wgrad: dy's shape is not the convolution's output's");
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  auto e = entry(s, x.get_device(), stream);
  auto dw = torch::empty({s.K, s.C, R, R}, x.options().memory_format(cl));
  run_plan("fused wgrad", *e, {kX, kY, kW}, {x.data_ptr(), dy.data_ptr(), dw.data_ptr()}, scale_bias, x, stream);
  return dw;
}

std::vector<std::string> fused_conv_plans() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  std::vector<std::string> out;
  for (auto& kv : c.plans) {
    const auto& p = *kv.second->plan;
    out.push_back("cuda:" + std::to_string(kv.first.first) + " " + kv.first.second.str() + ": engine " +
                  std::to_string(p.engine) + (p.runtime_compiled ? " (runtime-compiled)" : "") +
                  ", workspace " + std::to_string(p.workspace) + " bytes, heuristic " + p.mode +
                  (p.nondeterministic ? ", nondeterministic by cuDNN's notes" : "") +
                  (kv.first.second.prologue ? ", intermediates " + kv.second->intermediates : ""));
  }
  return out;
}

#endif

}  // namespace cs
