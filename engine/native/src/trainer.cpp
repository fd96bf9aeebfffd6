// trainer.cpp: the training step. On CUDA nothing in a step waits for the host;
// the device→host reads are the metrics vectors after a call's steps are done.
#include "trainer.h"

#include <ATen/Parallel.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <thread>
#include <unordered_set>

#include "checksum.h"
#include "comm_watch.h"
#include "compat.h"
#include "cudnn_tuning.h"
#include "interfere.h"
#include "kernels.h"
#include "linear_casts.h"
#include "loaded_libs.h"
#include "pipeline.h"
#include "rank_facts.h"
#include "row_random.h"
#include "timed_group.h"
#include "tp_model.h"
#include "tp_shards.h"
#include "zero.h"

#ifdef CS_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace cs {

using json = nlohmann::json;

namespace {

// The gradient-norm clip threshold: Trainer::kMaxGradNorm, or a diagnostic's
// CASESTUDY_MAX_GRAD_NORM (> 0; a large value leaves every gradient
// unclipped: engine/binding/tp_zero_diag_test.go).
double max_grad_norm() {
  const char* v = std::getenv("CASESTUDY_MAX_GRAD_NORM");
  if (v == nullptr || *v == '\0') return Trainer::kMaxGradNorm;
  char* end = nullptr;
  const double d = std::strtod(v, &end);
  if (end == v || *end != '\0' || !(d > 0) || !std::isfinite(d))
    throw ConfigError(std::string("CASESTUDY_MAX_GRAD_NORM=") + v + ": want a finite number > 0 (or unset it)");
  return d;
}

}  // namespace

json describe_json(const ModelConfig& m) {
  const Facts f = family(m.family).describe(m);
  json shapes = json::object();
  for (const auto& kv : f.shapes) shapes[kv.first] = kv.second;
  return {{"family", m.family},
          {"preset", m.preset},
          {"params", f.params},
          {"flops_per_sample", f.flops_per_sample},
          {"tokens_per_sample", f.tokens_per_sample},
          {"shapes", shapes}};
}

// Tensor parallelism: the mesh (tp.h: rank = t + tp * (d + dp * p)), this
// rank's tensor and data groups (and, with stages, its pipeline group, which
// the pipeline uses with the data group: connect_mesh), and the model's
// tensor-parallel side.
struct Trainer::TpState {
  tp::Mesh mesh;
  tp::MeshCoords at;
  tp::MeshGroups groups;
  tp::Context ctx;
  TensorParallelModel* model = nullptr;  // model_, as tp_model.h sees it
  // The tensor and data groups, timed (timed_group.h): the step's collectives.
  TimedGroup* tensor_timer = nullptr;
  TimedGroup* data_timer = nullptr;
  // zero.stage > 0: the data group as ZeRO's communicator (zero.h).
  std::unique_ptr<Communicator> data_comm;
  void begin_step() {
    for (auto* t : {tensor_timer, data_timer})
      if (t) t->begin_step();
  }
  void end_step() {
    for (auto* t : {tensor_timer, data_timer})
      if (t) t->end_step();
  }
  // At the step's timeline mark i, the collectives each timer had timed so
  // far: which phase (forward, backward, tail, optimizer) each one ran in.
  std::vector<int64_t> tensor_at, data_at;
  void at_mark(int i) {
    if (tensor_at.size() <= size_t(i)) tensor_at.resize(size_t(i) + 1), data_at.resize(size_t(i) + 1);
    tensor_at[size_t(i)] = tensor_timer ? tensor_timer->count() : 0;
    data_at[size_t(i)] = data_timer ? data_timer->count() : 0;
  }
};

struct Trainer::Graph {
#ifdef CS_WITH_CUDA
  explicit Graph(const torch::Device& d)
      : stream(c10::cuda::getStreamFromPool(false, d.index())) {}
  c10::cuda::CUDAStream stream;  // warm-up, capture and replay all run here
  std::unique_ptr<at::cuda::CUDAGraph> graph;
  std::vector<Batch> inputs;  // static buffers the data source's batches are copied into
#else
  explicit Graph(const torch::Device&) {}
#endif
};

// Device and stream state is thread-local in torch, and Go may call each ABI
// function from a different OS thread: every call sets it up again.
struct Trainer::Guards {
  explicit Guards(Trainer& t) : device(t.device_) {
#ifdef CS_WITH_CUDA
    if (t.graph_) stream.emplace(t.graph_->stream);
#endif
  }
  c10::DeviceGuard device;
#ifdef CS_WITH_CUDA
  c10::optional<c10::cuda::CUDAStreamGuard> stream;
#endif
};

void InitPhases::begin(const std::string& name) {
  end();
  current_ = name;
  start_ = std::chrono::steady_clock::now();
}

void InitPhases::end() {
  if (current_.empty()) return;
  synchronize(device_);  // the phase's device work is part of it
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
  auto it = std::find_if(phases_.begin(), phases_.end(),
                         [&](const std::pair<std::string, double>& p) { return p.first == current_; });
  if (it == phases_.end())
    phases_.emplace_back(current_, ms);
  else
    it->second += ms;
  current_.clear();
}

json InitPhases::to_json() const {
  auto out = json::array();
  for (const auto& p : phases_) out.push_back({{"name", p.first}, {"ms", p.second}});
  return out;
}

Trainer::Trainer(const EngineConfig& cfg)
    : cfg_(cfg), device_(torch::kCPU), family_(&family(cfg.model.family)), phases_(device_) {
  // A step runs pipeline.microbatches x grad_accum micro-batches (with one
  // stage: gradient accumulation).
  cfg_.grad_accum *= cfg_.pipeline.microbatches;
  facts_ = family_->describe(cfg_.model);
  // This rank's communication progress and its collective deadline start
  // afresh (cs_comm_progress, cs_set_comm_timeout).
  commwatch::reset();
  commwatch::set_deadline_ms(cfg_.dist.timeout_ms);
  phases_.begin("device_init");
  init_device();
  c10::DeviceGuard guard(device_);
  phases_.begin("model_build");
  build_model();
  phases_.begin("optimizer");
  build_optimizer();
  phases_.begin("data_setup");
  build_data();
  phases_.begin("comm_init");
  connect();
  arm_overflow_fault();
  phases_.end();
  mem_after_setup_ = memory_stats(device_).allocated;
}

// Data parallel: more than one rank, or one rank with dist.backend set: a world
// of one, as DDP with one process, where the communicator and the reducer run
// as on N ranks (how the NCCL path is checked on one GPU).
bool Trainer::data_parallel() const {
  return cfg_.pipeline.stages <= 1 && (cfg_.dist.world_size > 1 || !cfg_.dist.backend.empty());
}

void Trainer::init_device() {
  device_ = resolve_device(cfg_);
  // All the CPUs this process may run on: its affinity mask, which a cpuset or
  // Slurm's --cpu-bind narrows (hardware_concurrency counts the whole machine).
  threads_ = cfg_.threads > 0 ? cfg_.threads : affinity_cpus();
  set_threads();
  if (cfg_.precision == Precision::FP8 && family_->convolutions)
    throw UnsupportedError("precision fp8 puts the linear layers of gpt and bert in FP8; " +
                           cfg_.model.family +
                           " is convolutions, which have no FP8 path here: use precision bf16");
  check_precision(cfg_.precision, device_);
  if (cfg_.precision == Precision::FP8) fp8::configure(fp8::options(cfg_.fp8.scaling, cfg_.fp8.grad));
  try {
    kernels::in_use();  // reads CASESTUDY_KERNELS: a bad value fails here, not mid-step
    cudnn_ = cudnn_tuning_from_env();
  } catch (const std::invalid_argument& e) {
    throw ConfigError(e.what());
  }
  if (cfg_.graphs) {
    if (!device_.is_cuda()) throw UnsupportedError("graphs need a CUDA device (device is cpu)");
    if (data_parallel() || cfg_.pipeline.stages > 1)
      throw UnsupportedError(
          "graphs with data parallel (dist.world_size > 1, or dist.backend set) or a pipeline "
          "are not supported yet");
    if (family_->optimizer == OptimizerKind::AdamW && !CS_HAS_FUSED_ADAMW)
      throw UnsupportedError("graphs need the fused AdamW kernel (libtorch ≥ 2.1 with CUDA)");
  }
  c10::DeviceGuard guard(device_);
#ifdef CS_WITH_CUDA
  if (device_.is_cuda()) {
    // The CUDA context, the caching allocator and the cuBLAS handle come into
    // being at the first use: here, so that this phase holds them.
    torch::zeros({1}, torch::TensorOptions().device(device_));
    at::cuda::getCurrentCUDABlasHandle();
  }
#endif
  apply_math_mode(cfg_.precision);
  name_ = device_name(device_);
  if (device_.is_cuda()) note_libraries();
  peak_tflops_ = cfg_.peak_tflops > 0 ? cfg_.peak_tflops : table_peak_tflops(name_, cfg_.precision);
  if (cfg_.graphs) graph_ = std::make_unique<Graph>(device_);
  try {  // CASESTUDY_INTERFERE: the κ calibration's load beside each backward (interfere.h);
         // gloo:N is refused for a trainer without the DDP reducer of a world of
         // one before its Gloo group of N is set up
    interf_ = Interference::from_env(device_, [&](int n) { check_shadow_config(cfg_, n); });
  } catch (const std::runtime_error& e) {
    throw ConfigError(e.what());
  }
  max_grad_norm_ = max_grad_norm();  // a malformed CASESTUDY_MAX_GRAD_NORM fails here, not at the first step
  if (interf_ && (cfg_.graphs || cfg_.pipeline.stages > 1))
    throw UnsupportedError("CASESTUDY_INTERFERE (the κ calibration) with graphs or a pipeline");
}

void Trainer::build_model() {
  // Built from the seed alone, so every rank (and every pipeline stage) starts
  // from the same parameters.
  torch::manual_seed(uint64_t(cfg_.model.seed));
  if (family_->convolutions) apply_cudnn_tuning(cudnn_);
  int64_t numel = 0;  // of the whole model, before a pipeline stage drops the rest
  if (cfg_.tp.degree > 1) {
    build_mesh();
    // config.cpp refuses the families other than these two.
    model_ = cfg_.model.family == "bert" ? make_bert_tp(cfg_.model, device_, tp_->ctx)
                                         : make_gpt_tp(cfg_.model, device_, tp_->ctx);
    tp_->model = dynamic_cast<TensorParallelModel*>(model_.get());
    if (!tp_->model) throw std::logic_error("tp: the model is not tensor-parallel");
    numel = tp_->model->full_numel();
  } else {
    model_ = family_->build(cfg_.model, device_);
    for (const auto& p : model_->parameters()) numel += p.numel();
  }
  // The analytic count (cs_describe, FLOPs) must be the model that trains.
  if (numel != facts_.params)
    throw std::logic_error(cfg_.model.family + " " + cfg_.model.preset + ": built model has " +
                           std::to_string(numel) + " parameters, describe() says " +
                           std::to_string(facts_.params));
  if (cfg_.pipeline.stages > 1) {  // this rank keeps its stage's layers only
    std::vector<double> layer_ms;
    if (cfg_.pipeline.balance_by == "time" && cfg_.pipeline.balance.empty())
      layer_ms = measure_layers_everywhere();
    pipe_ = std::make_unique<Pipeline>(cfg_, *model_, device_, std::move(layer_ms));
    pipe_->release_others();
    empty_cache(device_);  // the other stages' weights leave no reserved memory behind
  }
  model_->to(device_);
  model_->train();
  for (const auto& kv : model_->named_parameters())
    if (!pipe_ || pipe_->holds(kv.value())) params_.push_back(kv.value());
}

void Trainer::build_mesh() {
  phases_.begin("comm_init");
  tp_ = std::make_unique<TpState>();
  try {
    tp_->mesh = tp::Mesh::of(cfg_.dist.world_size, cfg_.tp.degree, std::max(cfg_.pipeline.stages, 1));
  } catch (const std::invalid_argument& e) {
    throw ConfigError(e.what());
  }
  tp_->at = tp_->mesh.coords(cfg_.dist.rank);
  // The model's split, refused before any group exists and so on every rank
  // alike (the model checks it again when it shards itself).
  const auto& sh = facts_.shapes;
  tp::check_split(sh.at("heads"), sh.at("seq_len"), sh.at("vocab"), cfg_.tp.degree, cfg_.tp.sequence_parallel,
                  cfg_.model.family + " " + cfg_.model.preset + " at hidden " + std::to_string(sh.at("hidden")));
  comm_ = make_communicator(cfg_.dist, device_);
  tp_->groups = tp::make_mesh_groups(cfg_.dist, device_, *comm_, tp_->mesh);
  tp_->tensor_timer = time_group(tp_->groups.tensor, device_);
  // Under a pipeline the data group is the stage group: the pipeline times its average.
  if (cfg_.pipeline.stages <= 1) tp_->data_timer = time_group(tp_->groups.data, device_);
  tp_->ctx.group = tp_->groups.tensor.get();
  tp_->ctx.sequence_parallel = cfg_.tp.sequence_parallel;
  phases_.begin("model_build");
}

void Trainer::build_optimizer() {
  if (cfg_.precision == Precision::FP16) scaler_ = std::make_unique<LossScaler>(device_);
  check_zero(cfg_);
  if (cfg_.zero.stage > 0) return;  // sharded: built with the communicator (connect)
  std::vector<torch::Tensor> decay, no_decay;
  for (const auto& kv : model_->named_parameters()) {
    if (pipe_ && !pipe_->holds(kv.value())) continue;
    (model_->decays(kv.key()) ? decay : no_decay).push_back(kv.value());
  }
  const double lr = cfg_.lr > 0 ? cfg_.lr : family_->default_lr;
  optim_ = std::make_unique<Optimizer>(decay, no_decay, default_optim(family_->optimizer, lr));
  // The engine's AdamW writes the linear layers' bf16 copies as it updates
  // them ("adamc"). ZeRO's optimizer updates its shards, not these tensors:
  // its all-gathers leave the copies invalid (zero.cpp bumps the versions).
  if (auto* m = dynamic_cast<LinearCopiesModel*>(model_.get())) optim_->keep_copies(m->linear_copies());
}

void Trainer::build_data() {
  const auto& d = cfg_.dist;
  // DistributedSampler semantics: rank r of R generates only rows
  // [r*b, (r+1)*b) of the global batch of R*b, the rows a single rank with
  // batch R*b would draw (the families' data is keyed by row: row_random.h).
  if (pipe_) {  // the first stage reads inputs, the last targets: the same stream
    if (pipe_->needs_data()) data_ = family_->data(cfg_.model, device_, pipe_->dp_rank(), pipe_->dp_size());
  } else if (tp_) {  // every rank of a tensor group reads its data-parallel rank's rows
    data_ = family_->data(cfg_.model, device_, tp_->at.data, tp_->mesh.dp);
  } else if (d.world_size > 1) {
    data_ = family_->data(cfg_.model, device_, d.rank, d.world_size);
  } else {
    data_ = family_->data(cfg_.model, device_, 0, 1);
  }
}

void Trainer::connect() {
  if (cfg_.fault.kind == "stall" && !data_parallel())
    throw ConfigError("fault.kind stall stalls a DDP bucket: it needs data parallel "
                      "(dist.world_size > 1, or dist.backend set)");
  // ZeRO in place of the optimizer and the DDP reducer (zero.h).
  auto build_zero = [&](Communicator& comm, const DDPOptions& ddp, const ZeroTensorParallel* ztp,
                        bool overlap_gather) {
    std::vector<bool> decays;
    for (const auto& kv : model_->named_parameters()) decays.push_back(model_->decays(kv.key()));
    const double lr = cfg_.lr > 0 ? cfg_.lr : family_->default_lr;
    ZeroOptions z = cfg_.zero;
    z.overlap_gather = overlap_gather;
    zero_ = std::make_unique<ZeroOptimizer>(params_, decays, comm, z, ddp,
                                            default_optim(family_->optimizer, lr), ztp);
    reducer_ = zero_->make_reducer();
    if (!overlap_gather) return;
    // The all-gathers overlap the next forward, in the order its layers read them.
    std::vector<std::vector<torch::Tensor>> layers;
    for (int64_t l = 0; l < model_->num_layers(); l++) layers.push_back(model_->layer_parameters(l));
    layers.push_back(model_->loss_parameters());
    zero_->set_forward_order(layers);
  };
  if (tp_) {  // build_mesh connected; every rank built its shards from the seed
    if (pipe_) {  // the stage's neighbours and replicas are the mesh's pipeline and data groups
      pipe_->connect_mesh(tp_->groups.pipe.get(), tp_->groups.data.get(), tp_->model, tp_->ctx);
      return;  // check_zero refused ZeRO under a pipeline
    }
    if (cfg_.zero.stage == 0) return;
    // ZeRO over the data group (check_tp refused a group of one), its buckets
    // reduced after the backward: the group's collectives are synchronous.
    // With overlap the all-gathers run on the untimed group, on a thread (zero.h).
    // Not over NCCL groups: the thread's all-gathers on the data group's
    // communicator would run beside the forward's collectives on the tensor
    // group's, issued by two threads in an order that may differ between
    // ranks, which NCCL documents as a possible deadlock (kernels of two
    // communicators each waiting for peers that run the other's first). There
    // the all-gathers stay in the step, exposed, as with overlap_gather off;
    // cs_info's zero object says overlap_gather false.
    PipeGroup* async = nullptr;
    if (cfg_.zero.overlap_gather && comm_->backend() != "nccl")
      async = tp_->data_timer ? &tp_->data_timer->inner() : tp_->groups.data.get();
    tp_->data_comm = group_communicator(*tp_->groups.data, device_, comm_->backend(), comm_->version(), async);
    ZeroTensorParallel ztp;
    ztp.tensor = tp_->ctx.group;
    for (const auto& p : params_) ztp.sharded.push_back(tp_->model->tensor_sharded(p));
    DDPOptions ddp = cfg_.ddp;
    ddp.overlap = false;
    build_zero(*tp_->data_comm, ddp, &ztp, async != nullptr);
    return;
  }
  if (!pipe_ && !data_parallel()) return;
  if (!comm_) comm_ = make_communicator(cfg_.dist, device_);
  if (pipe_) {
    pipe_->connect(*comm_, cfg_.dist);  // stages built from the same seed start equal
    return;
  }
  torch::NoGradGuard ng;
  // Every rank starts equal: the reducer broadcasts the trainable parameters
  // bucket by bucket (as DDP's constructor); any other parameter goes here.
  // Buffers (BatchNorm's running statistics) are not broadcast: every rank
  // builds them from the same seed and keeps its own (docs/data-parallel.md).
  // The broadcasts write through raw pointers: the versions are bumped so that
  // what reads them (LinearCasts' kept copies, linear_casts.h) sees the change.
  auto broadcast = [&](torch::Tensor& p) {
    comm_->broadcast(p.detach(), 0);
    torch::autograd::impl::bump_version(p);
  };
  for (auto& p : params_)
    if (!p.requires_grad()) broadcast(p);
  if (cfg_.zero.stage > 0) {
    // ZeRO's reducers do not broadcast: every trainable parameter here.
    for (auto& p : params_)
      if (p.requires_grad()) broadcast(p);
    build_zero(*comm_, cfg_.ddp, nullptr, cfg_.zero.overlap_gather);
    return;
  }
  reducer_ = make_reducer(params_, interf_ ? interf_->reducer_comm(*comm_) : *comm_, cfg_.ddp);
}

// The reducers hold the communicators by reference (under tp the data group's,
// owned by tp_, declared after them): drop them first.
Trainer::~Trainer() {
  reducer_.reset();
  zero_.reset();
}

void Trainer::close() {
  Guards guards(*this);
  // After a communication failure the device may never finish what is queued
  // (a collective whose peer is gone): abort every communicator of the rank
  // (world, pipeline, stage) and do not wait for the device.
  if (commwatch::has_failed()) {
    commwatch::abort_all();
  } else {
    if (zero_) zero_->drain();  // the last step's all-gathers (zero.overlap_gather)
    synchronize(device_);
  }
  if (pipe_) pipe_->close();
  if (tp_)
    for (auto* g : {tp_->groups.tensor.get(), tp_->groups.data.get(), tp_->groups.pipe.get()})
      if (g) g->close();
  zero_.reset();
  reducer_.reset();  // its hooks and buckets, before the communicator they use
  if (comm_) comm_->close();
}

void Trainer::set_threads() const {
  // Debian's libtorch starts with 1 thread; OpenMP's count is per calling thread.
  if (at::get_num_threads() != threads_) at::set_num_threads(threads_);
}

// The copies of cuDNN, NCCL, cuBLAS, ... this process runs (loaded_libs.h),
// for info(); a cuDNN other than the one torch was built with is said on
// stderr: it serves torch's attention and convolutions too, and a faster or
// slower one changes every measurement (docs/perf.md, "Twenty-third session").
void Trainer::note_libraries() {
  libraries_ = loaded_libraries();
  cudnn_runtime_ = cudnn_runtime_version();
  const auto& hooks = at::detail::getCUDAHooks();
  if (cudnn_runtime_.empty() || !hooks.hasCuDNN()) return;
  const std::string built = std::to_string(hooks.versionCuDNN());
  // Major and minor (cuDNN 9: major*10000 + minor*100 + patch; 8: *1000, *100):
  // a newer patch in torch's own wheel directory is how torch's users update it.
  auto major_minor = [](long v) { return v >= 10000 ? v / 100 : (v / 1000) * 100 + (v / 100) % 10; };
  if (major_minor(std::stol(cudnn_runtime_)) == major_minor(hooks.versionCuDNN())) return;
  std::string path = "?";
  for (const auto& kv : libraries_.items())
    if (kv.key().rfind("libcudnn.so", 0) == 0) path = kv.value().get<std::string>();
  std::fprintf(stderr,
               "casestudy: the cuDNN this process loaded (%s, version %s) is not the one torch was built with "
               "(%s): the engine's RUNPATH or LD_LIBRARY_PATH found another copy first; every cuDNN kernel "
               "(attention, convolutions) runs from it\n",
               path.c_str(), cudnn_runtime_.c_str(), built.c_str());
}

json Trainer::info() const {
  json j = describe_json(cfg_.model);
  j["device"] = device_.str();
  j["device_name"] = name_;
  j["precision"] = precision_name(cfg_.precision);
  j["rank"] = cfg_.dist.rank;
  j["world_size"] = cfg_.dist.world_size;
  j["peak_tflops"] = peak_tflops_;
  j["mem_after_setup_bytes"] = mem_after_setup_;
  j["backend"] = comm_ ? comm_->backend() : "none";
  j["optimizer"] = zero_ ? zero_->implementation() : optim_->implementation();
  j["optimizer_state_bytes"] = zero_ ? zero_->state_bytes() : optim_->state_bytes();
  if (zero_) j["zero"] = zero_->info();
  j["attention"] = CS_HAS_SDPA && !compat::attention_math() ? "sdpa" : "math";
  j["kernels"] = kernels::in_use();
  if (family_->convolutions) j["cudnn"] = describe(cudnn_);
  j["graphs"] = cfg_.graphs;
  j["grad_accum"] = cfg_.grad_accum;
  j["threads"] = threads_;
  j["affinity_cpus"] = affinity_cpus();
  j["data_version"] = kDataVersion;
  const json gpu = gpu_identity(device_);  // items() must not outlive it
  for (const auto& kv : gpu.items()) j[kv.key()] = kv.value();
  j["torch"] = compat::torch_version();
  if (!libraries_.empty()) j["libraries"] = libraries_;
  if (!cudnn_runtime_.empty()) j["cudnn_runtime"] = cudnn_runtime_;
  j["init_phases"] = phases_.to_json();
  if (pipe_) j["pipeline"] = pipe_->info();
  if (tp_)
    j["tp"] = {{"degree", tp_->mesh.tp},          {"sequence_parallel", tp_->ctx.sequence_parallel},
               {"dp", tp_->mesh.dp},              {"tensor_rank", tp_->at.tensor},
               {"data_rank", tp_->at.data},       {"vocab_parallel", true}};
  return j;
}

void Trainer::inject_fault_before_step() {
  const auto& f = cfg_.fault;
  if (f.kind.empty() || f.rank != cfg_.dist.rank || step_ != f.at_step) return;
  const std::string where = " at step " + std::to_string(step_) + " on rank " +
                            std::to_string(cfg_.dist.rank);
  if (f.kind == "error") throw std::runtime_error("injected fault: error" + where);
  if (f.kind == "oom") throw OOMError("injected fault: out of memory" + where);
  if (f.kind == "hang")
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // the runner kills us
  if (f.kind == "stall") reducer_->stall_before(f.bucket, f.slow_ms);  // connect() checked reducer_
}

// fault.kind overflow (fp16 only, config.cpp): at fault.at_step, the
// gradient of this rank's last trainable parameter (model order; under tp a
// replicated one in GPT and BERT, a LayerNorm or row-parallel bias, which no
// tensor collective carries) gets an inf in its first element as backward
// computes it, before any reducer sees it: what a loss-scaled backward that
// overflowed on one rank leaves. Every rank of every group must skip the step
// (docs/tensor-parallel.md). The hook compares step_ on the host, so it needs
// eager steps (config.cpp refuses graphs).
void Trainer::arm_overflow_fault() {
  const auto& f = cfg_.fault;
  if (f.kind != "overflow" || f.rank != cfg_.dist.rank) return;
  torch::Tensor last;
  for (const auto& p : params_)
    if (p.requires_grad()) last = p;
  if (!last.defined()) throw std::logic_error("fault.kind overflow: no trainable parameter on this rank");
  const int64_t at = f.at_step;
  last.register_hook([this, at](const torch::Tensor& g) -> torch::Tensor {
    if (step_ != at) return torch::Tensor();  // undefined: the gradient unchanged
    auto h = g.clone(at::MemoryFormat::Contiguous);
    h.view(-1)[0] = std::numeric_limits<float>::infinity();
    return h;
  });
}

void Trainer::zero_grads() {
  torch::NoGradGuard ng;
  for (auto& p : params_) {
    auto& g = p.mutable_grad();
    if (!g.defined()) continue;
    if (reducer_)
      g.zero_();  // the reducer may hold on to gradient storage: keep it
    else
      g = torch::Tensor();
  }
}

// The bytes of gradient storage the rank holds now: the parameters' .grad()
// and what the reducer keeps beside them (dist.h held_storage), each storage
// once (DDP's .grad()s are views of its buckets).
int64_t Trainer::gradient_bytes_held() const {
  std::unordered_set<const c10::StorageImpl*> seen;
  int64_t bytes = 0;
  auto add = [&](const c10::Storage& s) {
    if (s.unsafeGetStorageImpl() && seen.insert(s.unsafeGetStorageImpl()).second) bytes += int64_t(s.nbytes());
  };
  for (const auto& p : params_)
    if (p.grad().defined()) add(p.grad().storage());
  for (const auto& s : reducer_->held_storage()) add(s);
  return bytes;
}

void Trainer::run_step(const std::vector<Batch>& batches, Timeline* timed) {
  const int64_t ga = cfg_.grad_accum;
  accum_grad_bytes_ = -1;
  auto mark = [&](int i) {
    if (timed) timed->mark(i);
    if (tp_) tp_->at_mark(i);
  };
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(device_);
  torch::Tensor loss_sum = torch::zeros({}, f32);
  torch::Tensor backward_scale = scaler_ ? scaler_->scale() / double(ga) : torch::Tensor();
  for (int64_t i = 0; i < ga && !pipe_; i++) {
    torch::Tensor loss;
    {
      AutocastScope autocast(device_, cfg_.precision);
      // zero.overlap_gather: each layer range waits for its buckets' all-gathers.
      loss = zero_ && zero_->overlapping() ? forward_loss_waiting(*model_, *zero_, batches[size_t(i)])
                                           : model_->forward_loss(batches[size_t(i)]);
    }
    mark(int(1 + 2 * i));
    loss_sum.add_(loss.detach());
    loss = backward_scale.defined() ? loss * backward_scale : loss / double(ga);
    if (reducer_ && scaler_ && i == ga - 1) reducer_->set_loss_scale(scaler_->scale());
    if (reducer_) reducer_->prepare(i == ga - 1);
    if (interf_) interf_->begin();
    loss.backward();
    if (interf_) interf_->end();
    if (reducer_ && i < ga - 1 && reducer_->reduces_each_micro_batch()) {  // ZeRO-2: dist.h
      if (tp_ && zero_) {  // this micro-batch's sequence-parallel sums before its reduce-scatter
        torch::NoGradGuard ng;
        tp::allreduce_sequence_parallel_grads(tp_->model->sequence_parallel_params(), tp_->ctx);
      }
      reducer_->end_micro_batch();
    }
    if (reducer_ && i < ga - 1) accum_grad_bytes_ = std::max(accum_grad_bytes_, gradient_bytes_held());
    mark(int(2 + 2 * i));
  }
  if (tp_ && zero_) {  // as reduce_and_clip_tp: the tensor group's sum before the data group's
    torch::NoGradGuard ng;
    tp::allreduce_sequence_parallel_grads(tp_->model->sequence_parallel_params(), tp_->ctx);
  }
  if (reducer_) reducer_->finalize();
  ClipResult clip;
  if (pipe_) {  // schedule, DP average, tied weights, clip over all stages
    PipelineStep ps = pipe_->step(batches, scaler_ ? scaler_->scale() : torch::Tensor(), max_grad_norm_);
    loss_sum = ps.loss * double(ga);
    clip.norm = ps.norm;
    clip.found_inf = ps.found_inf;
  }
  mark(int(2 * ga + 1));

  torch::Tensor inv_scale = scaler_ ? scaler_->scale().reciprocal() : torch::Tensor();
  // A fused optimizer applies the unscale x clip coefficient as it reads each
  // gradient (one pass over the gradients fewer); the pipeline clips itself.
  if (zero_) {  // clip, the rank's shard, all-gather (zero.h)
    clip = zero_->step(inv_scale, max_grad_norm_, scaler_ != nullptr);
  } else {
    const bool fold = !pipe_ && optim_->folds_grad_coef();
    if (tp_ && !pipe_)
      clip = reduce_and_clip_tp(inv_scale, /*apply=*/!fold);
    else if (!pipe_)
      clip = unscale_and_clip(params_, inv_scale, max_grad_norm_, /*apply=*/!fold);
    optim_->step(scaler_ ? clip.found_inf : torch::Tensor(), fold ? clip.coef : torch::Tensor());
  }
  if (reducer_) reducer_->end_step(scaler_ ? clip.found_inf : torch::Tensor());
  torch::Tensor scale = scaler_ ? scaler_->scale().clone() : torch::zeros({}, f32);
  if (scaler_) scaler_->update(clip.found_inf);
  torch::Tensor skipped = scaler_ ? clip.found_inf : torch::zeros({}, f32);
  metrics_ = torch::stack({loss_sum / double(ga), clip.norm, skipped, scale});
}

ClipResult Trainer::reduce_and_clip_tp(const torch::Tensor& inv_scale, bool apply) {
  torch::NoGradGuard ng;
  // Sequence parallel: LayerNorms, row-parallel biases and positions saw
  // only this rank's sequence shard; their sums make them replicated again.
  tp::allreduce_sequence_parallel_grads(tp_->model->sequence_parallel_params(), tp_->ctx);
  std::vector<torch::Tensor> grads, sharded, replicated;
  for (const auto& p : params_) {
    if (!p.grad().defined()) continue;
    grads.push_back(p.grad());
    (tp_->model->tensor_sharded(p) ? sharded : replicated).push_back(p.grad());
  }
  if (grads.empty()) throw std::runtime_error("no parameter received a gradient");
  // The data group's average, one flat all-reduce (as the pipeline's stage group).
  if (PipeGroup* dp = tp_->groups.data.get()) average_over_group(grads, *dp);
  // The whole model's squared norm: the shards' squares summed over the
  // tensor group, the replicated parameters' (equal on every tensor rank) once.
  // Float64 throughout: grad_sumsq sums the per-tensor norms' squares in it.
  const auto sumsq = tp::tensor_parallel_sumsq(grad_sumsq(sharded, device_), grad_sumsq(replicated, device_),
                                           tp_->ctx.group);
  return clip_grads(grads, sumsq, inv_scale, max_grad_norm_, apply);
}

// The step's tensor- and data-group collectives (their timers' pairs of
// marks, read once now that the step is done). They run on the compute stream
// and the host waits for each, so all their time is exposed: comm_ms and
// exposed_comm_ms are both the sum over both groups; tp_comm_ms is the tensor
// group's share (activations, the norm), the rest the data group's average.
// They ran inside the forward, backward and optimizer phases (and with ZeRO
// the tail: the reducer's finalize): those phases' times are given without them, so that the step's parts add up to it once
// (forward + backward + optimizer + exposed communication + the rest).
//
// Under a pipeline (called after Pipeline::add_metrics) the stage's forward
// and backward are its busy time, tensor collectives included (the bubble is
// the window less them); the tensor group's collectives are added to the
// pipeline's communication (point-to-point, stage-group average, tied sums,
// norm) in comm_ms, not in exposed_comm_ms: the step's parts would count the
// ones inside the forward and backward twice.
void Trainer::add_tp_comm(json& m) {
  if (pipe_) {
    const GroupCommStats t = tp_->tensor_timer ? tp_->tensor_timer->stats() : GroupCommStats();
    m["tp_comm_ms"] = t.ms;
    m["tp_collectives"] = t.collectives;
    m["tp_comm_bytes"] = t.bytes;
    m["comm_ms"] = m["comm_ms"].get<double>() + t.ms;
    m["comm_bytes"] = m["comm_bytes"].get<int64_t>() + t.bytes;
    m["collectives"] = m["collectives"].get<int64_t>() + t.collectives;
    return;
  }
  const int64_t ga = cfg_.grad_accum;
  const int last = int(2 * ga + 2);
  double phase[4] = {0, 0, 0, 0};  // forward, backward, optimizer, tail (ZeRO's reduce)
  auto read = [&](TimedGroup* timer, const std::vector<int64_t>& at) {
    GroupCommStats s;
    if (!timer) return s;
    s = timer->stats();
    if (at.size() <= size_t(last)) return s;
    for (int i = 0; i < last; i++) {  // phase of the interval [mark i, mark i + 1)
      const int k = i < 2 * ga ? i % 2 : i == 2 * ga + 1 ? 2 : 3;
      for (int64_t c = at[size_t(i)]; c < at[size_t(i + 1)] && c < int64_t(s.each_ms.size()); c++)
        if (k >= 0) phase[k] += s.each_ms[size_t(c)];
    }
    return s;
  };
  const GroupCommStats t = read(tp_->tensor_timer, tp_->tensor_at);
  const GroupCommStats d = read(tp_->data_timer, tp_->data_at);
  const char* names[4] = {"forward_ms", "backward_ms", "optimizer_ms", "tail_ms"};
  for (int k = 0; k < 4; k++) m[names[k]] = std::max(0.0, m[names[k]].get<double>() - phase[k]);
  m["tp_comm_ms"] = t.ms;
  m["tp_collectives"] = t.collectives;
  m["tp_comm_bytes"] = t.bytes;
  m["comm_ms"] = t.ms + d.ms;
  m["exposed_comm_ms"] = t.ms + d.ms;
  m["comm_bytes"] = t.bytes + d.bytes;
  m["collectives"] = t.collectives + d.collectives;
}

void Trainer::capture(const std::vector<Batch>& batches) {
#ifdef CS_WITH_CUDA
  auto& g = *graph_;
  g.inputs.clear();
  for (const auto& b : batches) {
    Batch s;
    s.input = b.input.clone();
    s.target = b.target.clone();
    if (b.aux.defined()) s.aux = b.aux.clone();
    if (b.aux_target.defined()) s.aux_target = b.aux_target.clone();
    g.inputs.push_back(s);
  }
  // The captured step creates the gradients in the graph's pool: none may exist
  // before, and no autograd graph of an earlier step may be alive.
  for (auto& p : params_) p.mutable_grad() = torch::Tensor();
  metrics_ = torch::Tensor();
  g.stream.synchronize();
  // The linear layers' copies the captured forward reads without a cast must
  // be written by the captured optimizer step ("adamc", linear_casts.h).
  auto* owner = dynamic_cast<LinearCopiesModel*>(model_.get());
  auto copies = owner ? owner->linear_copies() : nullptr;
  if (copies) copies->clear_served();
  g.graph = std::make_unique<at::cuda::CUDAGraph>();
  g.graph->capture_begin();
  try {
    run_step(g.inputs, /*timed=*/nullptr);
  } catch (...) {
    try {
      g.graph->capture_end();
    } catch (...) {
    }
    g.graph.reset();
    if (copies) copies->invalidate_all();  // captured casts and updates wrote nothing
    throw;
  }
  g.graph->capture_end();
  if (copies && !copies->served_valid()) {
    g.graph.reset();
    copies->invalidate_all();
    throw std::logic_error(
        "graphs: the captured step reads a linear layer's bf16 copy that its optimizer step does "
        "not write, so every replay would read stale weights; run with CASESTUDY_KERNELS=-adamc "
        "and report it");
  }
#endif
}

// pipeline.balance_by time: every rank times each layer of the whole model on
// its device (measure_layer_ms); the split uses the mean over ranks, as rank 0
// has it, so that every rank cuts the model alike. Creates the communicator.
std::vector<double> Trainer::measure_layers_everywhere() {
  const auto& d = cfg_.dist;
  model_->to(device_);
  phases_.begin("comm_init");
  comm_ = make_communicator(d, device_);
  phases_.begin("model_build");
  const Batch b = family_->data(cfg_.model, device_, 0, 1)->next();
  const auto ms = measure_layer_ms(*model_, b, device_, cfg_.precision);
  auto t = torch::tensor(ms, torch::kFloat64).to(device_);
  comm_->all_reduce_sum(t)->wait();
  comm_->broadcast(t, 0);
  t = (t / double(d.world_size)).cpu().contiguous();
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

json Trainer::step() { return steps(1).at(0); }

json Trainer::steps(int n) {
  if (n < 1) throw ConfigError("steps: n must be at least 1 (got " + std::to_string(n) + ")");
  set_threads();
  Guards guards(*this);
  const int last = int(2 * cfg_.grad_accum + 2);
  // The reducer's and the pipeline's communication times are the last step's:
  // those steps are read as each ends.
  // So are tensor parallelism's (its groups' timers keep one step's marks).
  const size_t window = reducer_ || pipe_ || tp_ ? 1 : size_t(n);
  while (timelines_.size() < window) timelines_.push_back(make_timeline(device_, last + 1));
  json out = json::array();
  std::vector<Issued> issued;
  reset_peak_memory(device_);
  for (int i = 0; i < n; i++) {
    issued.push_back(issue(*timelines_[issued.size()]));
    if (issued.size() < window && i + 1 < n) continue;
    // The step's collectives first, under the communicator's deadline: one
    // that never ends (a stalled peer, a stall fault) throws CommError here
    // instead of holding the host in the device wait below.
    if (reducer_) reducer_->stats();
    timelines_[issued.size() - 1]->finish(last);  // the device's one wait
    const MemoryStats mem = memory_stats(device_);
    for (size_t k = 0; k < issued.size(); k++)
      out.push_back(metrics_json(issued[k], *timelines_[k], mem));
    issued.clear();
    reset_peak_memory(device_);
  }
  return out;
}

Trainer::Issued Trainer::issue(Timeline& tl) {
  commwatch::step(step_);
  inject_fault_before_step();
  const bool slow = cfg_.fault.kind == "slow" && cfg_.fault.rank == cfg_.dist.rank &&
                    step_ >= cfg_.fault.at_step;
  const int64_t ga = cfg_.grad_accum;
  const int last = int(2 * ga + 2);

  std::vector<Batch> batches;
  for (int64_t i = 0; i < ga; i++) batches.push_back(data_ ? data_->next() : Batch());

  bool replayed = false;
#ifdef CS_WITH_CUDA
  if (graph_ && step_ >= kGraphWarmup) {
    if (!graph_->graph) {
      capture(batches);
    } else {
      for (size_t i = 0; i < batches.size(); i++) {
        auto& s = graph_->inputs[i];
        s.input.copy_(batches[i].input, /*non_blocking=*/true);
        s.target.copy_(batches[i].target, true);
        if (s.aux.defined()) s.aux.copy_(batches[i].aux, true);
        if (s.aux_target.defined()) s.aux_target.copy_(batches[i].aux_target, true);
      }
    }
    tl.mark(0);
    if (slow) std::this_thread::sleep_for(std::chrono::milliseconds(cfg_.fault.slow_ms));
    graph_->graph->replay();
    tl.mark(last);
    replayed = true;
  }
#endif
  if (!replayed) {
    tl.mark(0);
    if (slow) std::this_thread::sleep_for(std::chrono::milliseconds(cfg_.fault.slow_ms));
    zero_grads();
    if (tp_) tp_->begin_step(), tp_->at_mark(0);
    run_step(batches, &tl);
    if (tp_) tp_->end_step(), tp_->at_mark(last);
    tl.mark(last);
  }
  // A replay writes the graph's one metrics vector: the next would overwrite it.
  Issued s{step_, replayed, replayed ? metrics_.clone() : metrics_, replayed ? -1 : accum_grad_bytes_};
  step_++;
  return s;
}

json Trainer::metrics_json(const Issued& s, Timeline& tl, const MemoryStats& mem) {
  const int64_t ga = cfg_.grad_accum;
  const int last = int(2 * ga + 2);
  const bool replayed = s.replayed;
  auto host = s.metrics.detach().to(torch::kCPU).to(torch::kFloat64);
  auto v = host.accessor<double, 1>();
  json m;
  m["step"] = s.step;
  m["loss"] = v[0];
  m["grad_norm"] = v[1];
  m["skipped"] = v[2] != 0;
  m["loss_scale"] = v[3];
  const double step_ms = tl.ms(0, last);
  double fwd = 0, bwd = 0, opt = 0;
  if (!replayed) {
    for (int64_t i = 0; i < ga && !pipe_; i++) {
      fwd += tl.ms(int(2 * i), int(2 * i + 1));
      bwd += tl.ms(int(2 * i + 1), int(2 * i + 2));
    }
    opt = tl.ms(int(2 * ga + 1), last);
  }
  m["step_ms"] = step_ms;
  m["forward_ms"] = fwd;
  m["backward_ms"] = bwd;
  m["optimizer_ms"] = opt;
  // The reducer's finalize: the buckets not yet launched, the wait, the divide
  // or cast back (the tail of the multi-GPU prediction, docs/predict.md).
  m["tail_ms"] = replayed || pipe_ ? 0.0 : tl.ms(int(2 * ga), int(2 * ga + 1));
  m["graphed"] = replayed;
  if (interf_) {
    m["interfere_gbps"] = interf_->take_gbps(bwd, int(ga));
    m["interfere_timeouts"] = interf_->timeouts();
    if (interf_->shadow_ranks() > 0) m["interfere_ranks"] = interf_->shadow_ranks();
  }
  const int64_t samples = cfg_.model.micro_batch * ga;
  const int64_t tokens = samples * facts_.tokens_per_sample;
  const double sec = step_ms / 1e3;
  m["samples"] = samples;
  m["tokens"] = tokens;
  m["samples_per_s"] = sec > 0 ? double(samples) / sec : 0.0;
  m["tokens_per_s"] = sec > 0 ? double(tokens) / sec : 0.0;
  // A tensor group's ranks share its samples' FLOPs: this rank does 1/tp of
  // the model's (its shards' matmuls; the replicated LayerNorms are noise).
  const double flop_share = tp_ ? 1.0 / double(tp_->mesh.tp) : 1.0;
  const double tflops =
      sec > 0 ? facts_.flops_per_sample * flop_share * double(samples) / sec / 1e12 : 0.0;
  m["tflops"] = tflops;
  m["mfu"] = peak_tflops_ > 0 ? tflops / peak_tflops_ : 0.0;
  // A tensor group trains its micro-batch together: its samples count once, on
  // tensor rank 0 (the runner sums samples over ranks), as a pipeline counts a
  // replica's on its last stage.
  if (tp_ && tp_->at.tensor != 0) {
    m["samples"] = 0;
    m["tokens"] = 0;
    m["samples_per_s"] = 0.0;
    m["tokens_per_s"] = 0.0;
  }
  m["mem_peak_bytes"] = mem.peak;
  m["mem_reserved_bytes"] = mem.reserved;
  m["bubble_ms"] = 0.0;
  m["comm_ms"] = 0.0;
  m["exposed_comm_ms"] = 0.0;
  m["comm_bytes"] = 0;
  m["collectives"] = 0;
  if (reducer_) {
    const ReducerStats rs = reducer_->stats();
    m["comm_ms"] = rs.comm_ms;
    m["exposed_comm_ms"] = rs.exposed_comm_ms;
    m["comm_bytes"] = rs.comm_bytes;
    m["collectives"] = rs.collectives;
    if (rs.held_peak_bytes >= 0) m["grad_bucket_peak_bytes"] = rs.held_peak_bytes;
    if (s.accum_grad_bytes >= 0) m["accum_grad_bytes"] = s.accum_grad_bytes;
    json buckets = json::array();
    for (const auto& b : rs.buckets) {
      buckets.push_back({{"bytes", b.bytes},
                         {"ms", b.ms},
                         {"op", b.op},
                         {"algbw_gbs", algbw_gbs(b)},
                         {"ready_ms", b.ready_ms},
                         {"busbw_gbs", busbw_gbs(b, tp_ ? tp_->mesh.dp : cfg_.dist.world_size)}});
    }
    m["buckets"] = buckets;
  }
  m["optimizer_state_bytes"] = zero_ ? zero_->state_bytes() : optim_->state_bytes();
  if (pipe_) pipe_->add_metrics(m);
  if (tp_) add_tp_comm(m);  // the tensor (and data) group's, after the pipeline's
  if (zero_) zero_->add_metrics(m, /*totals=*/!tp_);  // after tp's totals: zero.h says what each holds
  return m;
}

json Trainer::checksum() {
  Guards guards(*this);
  if (zero_) zero_->drain();  // the parameters' all-gathers may still be in flight
  std::vector<torch::Tensor> owned;
  for (const auto& p : params_)
    if (!pipe_ || pipe_->owns(p)) owned.push_back(p);  // a tied copy: counted on its owner stage
  // Tensor parallelism: gathered over the tensor group (a collective), the
  // stage's parameters under a pipeline, else the whole model.
  if (tp_) owned = pipe_ ? tp_->model->gathered(owned) : tp_->model->gathered_parameters();
  const ParamChecksum c = param_checksum(owned);  // on the device; checksum.h
  if (const char* dir = std::getenv("CASESTUDY_PARAM_DUMP"); dir != nullptr && *dir != '\0')
    write_param_dump(std::string(dir) + "/rank" + std::to_string(cfg_.dist.rank) + ".bin", owned);
  return {{"sum", c.sum}, {"hash", c.hex()}};
}

}  // namespace cs
