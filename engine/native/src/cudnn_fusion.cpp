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
#include <ATen/Context.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>

#include "cudnn_fusion_graph.h"
#endif

namespace cs {

bool FusedConvShape::operator<(const FusedConvShape& o) const {
  return std::tie(N, C, H, W, K, R, stride, prologue) <
         std::tie(o.N, o.C, o.H, o.W, o.K, o.R, o.stride, o.prologue);
}

std::string FusedConvShape::str() const {
  std::ostringstream s;
  s << (prologue ? "scale-bias-relu + " : "") << R << "x" << R << " conv " << C << "->" << K
    << " stride " << stride << " on " << N << "x" << H << "x" << W << " + genstats";
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

std::vector<std::string> fused_conv_plans() { return {}; }

#else

namespace fe = cudnnfe;

bool cudnn_fusion_built() { return true; }
std::string cudnn_fusion_missing() { return ""; }

namespace {

// Tensor uids of the graph (the probe's layout).
enum : int64_t { kX = 1, kW = 2, kY = 3, kSum = 4, kSqSum = 5, kScale = 6, kBias = 7, kVirtual = 8 };

struct Entry {
  std::unique_ptr<fe::Graph> graph;
  std::shared_ptr<fe::Plan> plan;
  cudnnHandle_t handle = nullptr;
  int timed = 0;          // plans timed to choose it (0: the heuristic's first, untimed)
  double ms = 0;          // its time when timed
  double first_ms = 0;    // the heuristic's first plan's time when timed
};

// The tensors of one run of a graph of shape s.
struct Args {
  torch::Tensor x, w, y, sums, scale_bias;  // scale_bias undefined without a prologue
};

// The variant pack binding a's tensors and the workspace ws to the graph's uids.
fe::DescP pack_of(const FusedConvShape& s, const Args& a, void* ws) {
  std::vector<int64_t> uids{kX, kW, kY, kSum, kSqSum};
  std::vector<void*> ptrs{a.x.data_ptr(), a.w.data_ptr(), a.y.data_ptr(), a.sums.data_ptr<float>(),
                          a.sums.data_ptr<float>() + s.K};
  if (s.prologue) {
    uids.insert(uids.end(), {kScale, kBias});
    auto* sb = static_cast<at::Half*>(a.scale_bias.data_ptr());
    ptrs.insert(ptrs.end(), {static_cast<void*>(sb), static_cast<void*>(sb + s.C)});
  }
  for (void* p : ptrs)
    TORCH_CHECK(reinterpret_cast<uintptr_t>(p) % 16 == 0, "fused conv: a tensor is not 16-byte aligned");
  return fe::variant_pack(uids, ptrs, ws);
}

// y and sums for x of shape s (GenStats overwrites sums).
void outputs(const FusedConvShape& s, Args& a) {
  const auto cl = at::MemoryFormat::ChannelsLast;
  a.y = torch::empty({s.N, s.K, s.Ho(), s.Wo()}, a.x.options().memory_format(cl));
  a.sums = torch::empty({2, s.K}, a.x.options().dtype(torch::kFloat32));
}

// How many of the heuristic's plans build() times to keep the fastest: as many as cuDNN
// autotuning tries for libtorch's convolutions (cudnn.benchmark_limit, through libtorch's
// context: apply_cudnn_tuning; 0 = every one), 1 (the heuristic's first, untimed) without
// autotuning or with CASESTUDY_CUDNN_FUSION_PLAN=first (the plan before autotuning, for A/B
// runs: docs/resnet-fusion.md section 8).
int plans_to_time() {
  const char* v = std::getenv("CASESTUDY_CUDNN_FUSION_PLAN");
  const std::string mode = v ? v : "";
  if (mode == "first") return 1;
  if (!mode.empty() && mode != "tuned")
    throw std::invalid_argument("CASESTUDY_CUDNN_FUSION_PLAN=" + mode +
                                ": want tuned (the fastest of cudnn.benchmark_limit's count of plans, the "
                                "default) or first (cuDNN's heuristic's first plan, untimed)");
  auto& ctx = at::globalContext();
  if (!ctx.benchmarkCuDNN()) return 1;
  const int limit = ctx.benchmarkLimitCuDNN();
  return limit <= 0 ? INT_MAX : limit;
}

// Median time of plan p over runs of a's tensors on stream (3 runs first, unmeasured).
double time_plan(const Entry& e, const fe::Plan& p, const FusedConvShape& s, const Args& a, cudaStream_t stream) {
  auto ws = torch::empty({std::max<int64_t>(p.workspace, 1)}, a.x.options().dtype(torch::kUInt8));
  auto pack = pack_of(s, a, ws.data_ptr());
  CK(cudnnSetStream(e.handle, stream));
  for (int i = 0; i < 3; i++) fe::execute(e.handle, p, *pack);
  constexpr int kRuns = 9;
  std::vector<cudaEvent_t> ev(kRuns + 1);
  for (auto& x : ev) C10_CUDA_CHECK(cudaEventCreate(&x));
  C10_CUDA_CHECK(cudaEventRecord(ev[0], stream));
  for (int i = 0; i < kRuns; i++) {
    fe::execute(e.handle, p, *pack);
    C10_CUDA_CHECK(cudaEventRecord(ev[i + 1], stream));
  }
  C10_CUDA_CHECK(cudaEventSynchronize(ev[kRuns]));
  std::vector<double> ms(kRuns);
  for (int i = 0; i < kRuns; i++) {
    float t = 0;
    C10_CUDA_CHECK(cudaEventElapsedTime(&t, ev[i], ev[i + 1]));
    ms[i] = t;
  }
  for (auto& x : ev) cudaEventDestroy(x);
  std::nth_element(ms.begin(), ms.begin() + kRuns / 2, ms.end());
  return ms[kRuns / 2];
}

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

// The graph of shape s and its plan: the heuristic's first plan that finalizes (mode A, else
// FALLBACK), or, when plans_to_time() > 1, the fastest of that many of the same mode's plans,
// each timed on this device's stream with tensors of the shape (runtime-compiled engines left
// out after the first: their finalize compiles for seconds; plans asking over 4 GiB of
// workspace left out).
std::shared_ptr<Entry> build(const FusedConvShape& s, cudnnHandle_t h, int device, cudaStream_t stream) {
  auto e = std::make_shared<Entry>();
  e->handle = h;
  e->graph = std::make_unique<fe::Graph>(h);
  fe::Graph& g = *e->graph;
  const cudnnDataType_t half = CUDNN_DATA_HALF, f32 = CUDNN_DATA_FLOAT;
  auto& X = g.tensor(kX, half, s.N, s.C, s.H, s.W, false);
  auto& W = g.tensor(kW, half, s.K, s.C, s.R, s.R, false);
  auto& Y = g.tensor(kY, half, s.N, s.K, s.Ho(), s.Wo(), false);
  auto& SUM = g.tensor(kSum, f32, 1, s.K, 1, 1, false);
  auto& SQ = g.tensor(kSqSum, f32, 1, s.K, 1, 1, false);
  if (s.prologue)
    g.conv_fwd(g.scale_bias_relu(X, kScale, kVirtual, half, f32, s.N, s.C, s.H, s.W), W, Y, s.R / 2,
               s.stride);
  else
    g.conv_fwd(X, W, Y, s.R / 2, s.stride);
  g.genstats(Y, SUM, SQ, f32);
  g.finalize();
  const int want = plans_to_time();
  std::string why;
  std::vector<std::shared_ptr<fe::Plan>> plans;
  for (auto mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    for (auto& cfg : fe::engine_configs(g, mode)) {
      if ((int)plans.size() >= want) break;
      if (!plans.empty() && fe::runtime_compiled(cfg)) continue;
      auto p = fe::make_plan(g, cfg, &why);
      if (!p) continue;
      if (!plans.empty() && p->workspace > (int64_t(4) << 30)) continue;
      p->mode = mode == CUDNN_HEUR_MODE_A ? "A" : "fallback";
      plans.push_back(p);
    }
    if (!plans.empty()) break;
  }
  if (plans.empty())
    throw std::runtime_error("resnet.fusion: cuDNN has no engine for " + s.str() +
                             (why.empty() ? std::string(" (no engine config proposed)") : " (last refusal: " + why + ")"));
  e->plan = plans.front();
  if (plans.size() == 1) return e;
  // Time each on tensors of the shape: x and the weights drawn small, the prologue the identity.
  const auto cl = at::MemoryFormat::ChannelsLast;
  auto opt = torch::TensorOptions().device(torch::kCUDA, device).dtype(torch::kHalf);
  Args a;
  a.x = torch::randn({s.N, s.C, s.H, s.W}, opt).contiguous(cl);
  a.w = (torch::randn({s.K, s.C, s.R, s.R}, opt) * 0.05).contiguous(cl);
  if (s.prologue) a.scale_bias = torch::cat({torch::ones({1, s.C}, opt), torch::zeros({1, s.C}, opt)}).contiguous();
  outputs(s, a);
  for (size_t i = 0; i < plans.size(); i++) {
    double ms;
    try {
      ms = time_plan(*e, *plans[i], s, a, stream);
    } catch (const fe::CudnnError&) {
      continue;  // an engine that finalized and does not run here: not chosen
    }
    if (i == 0) e->first_ms = ms;
    if (e->timed == 0 || ms < e->ms) {
      e->plan = plans[i];
      e->ms = ms;
    }
    e->timed++;
  }
  if (e->timed == 0) throw std::runtime_error("resnet.fusion: no cuDNN plan for " + s.str() + " ran when timed");
  if (e->plan != plans.front())
    std::fprintf(stderr, "resnet.fusion: %s: cuDNN engine %lld (%.3f ms) in place of the heuristic's first, engine %lld (%.3f ms); fastest of %d timed\n",
                 s.str().c_str(), (long long)e->plan->engine, e->ms, (long long)plans.front()->engine, e->first_ms,
                 e->timed);
  return e;
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
  auto e = build(s, handle_locked(c, device), device, stream);
  c.plans[key] = e;
  return e;
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
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kHalf && x.dim() == 4 && x.is_contiguous(cl),
              "fused conv: x must be CUDA fp16 channels_last");
  TORCH_CHECK(w.is_cuda() && w.scalar_type() == torch::kHalf && w.dim() == 4 && w.is_contiguous(cl) &&
                  w.size(1) == x.size(1) && w.size(2) == w.size(3),
              "fused conv: w must be CUDA fp16 channels_last [K, C, R, R]");
  const bool prologue = scale_bias.defined();
  TORCH_CHECK(!prologue || (scale_bias.scalar_type() == torch::kHalf && scale_bias.is_contiguous() &&
                            scale_bias.numel() == 2 * x.size(1)),
              "fused conv: scale_bias must be fp16 [2, C]");
  const FusedConvShape s{x.size(0), x.size(1), x.size(2), x.size(3), w.size(0), w.size(2), stride, prologue};
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  auto e = entry(s, x.get_device(), stream);
  Args a{x, w, {}, {}, scale_bias};
  outputs(s, a);
  auto ws = torch::empty({std::max<int64_t>(e->plan->workspace, 1)}, x.options().dtype(torch::kUInt8));
  auto pack = pack_of(s, a, ws.data_ptr());
  CK(cudnnSetStream(e->handle, stream));
  fe::execute(e->handle, *e->plan, *pack);
  return {a.y, a.sums};
}

namespace {
std::string ms3(double ms) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", ms);
  return b;
}
}  // namespace

std::vector<std::string> fused_conv_plans() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  std::vector<std::string> out;
  for (auto& kv : c.plans) {
    const auto& p = *kv.second->plan;
    out.push_back("cuda:" + std::to_string(kv.first.first) + " " + kv.first.second.str() + ": engine " +
                  std::to_string(p.engine) + (p.runtime_compiled ? " (runtime-compiled)" : "") +
                  ", workspace " + std::to_string(p.workspace) + " bytes, heuristic " + p.mode +
                  (kv.second->timed > 1 ? ", fastest of " + std::to_string(kv.second->timed) + " timed: " +
                                              ms3(kv.second->ms) + " ms (the heuristic's first " +
                                              ms3(kv.second->first_ms) + ")"
                                        : std::string(", untimed (the heuristic's first)")));
  }
  return out;
}

#endif

}  // namespace cs
