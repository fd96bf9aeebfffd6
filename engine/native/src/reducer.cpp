// reducer.cpp: DDP-style gradient reduction (dist.h GradReducer).
//
// Parameters are bucketed in reverse registration order (the order backward
// produces their gradients), the first bucket capped at ddp.first_bucket_mb and
// the rest at ddp.bucket_mb: a bucket closes once it reaches its cap, as in
// PyTorch's compute_bucket_assignment_by_size after DDP's bucket rebuild. Each
// parameter's .grad() is a view into its bucket's flat storage, so autograd
// accumulates straight into what is sent. With ddp.overlap a post-hook on each
// parameter's AccumulateGrad node (the hook DDP itself uses; it fires after the
// gradient is accumulated, on libtorch 1.13 and 2.x alike) counts the bucket's
// ready gradients and launches the bucket's collective when the last one lands;
// buckets launch strictly in index order so every rank issues the same sequence.
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <chrono>
#include <cstdio>
#include <cmath>
#include <map>
#include <mutex>

#include <thread>

#include "comm_watch.h"
#include "dist.h"
#include "model.h"
#include "ready_hook.h"

#ifdef CS_WITH_NCCL
#include <ATen/cuda/Sleep.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

namespace cs {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// Measures the time the step waits in finalize(): the host clock on the CPU,
// CUDA events on the current stream on a GPU (read lazily, so finalize does not
// block the host).
class WaitClock {
 public:
  explicit WaitClock(torch::Device device) : cuda_(device.is_cuda()) {
#ifdef CS_WITH_NCCL
    if (cuda_) {
      c10::cuda::CUDAGuard guard(device);
      check(cudaEventCreate(&start_));
      check(cudaEventCreate(&stop_));
    }
#endif
  }
  ~WaitClock() {
#ifdef CS_WITH_NCCL
    if (cuda_) {
      cudaEventDestroy(start_);
      cudaEventDestroy(stop_);
    }
#endif
  }
  void start() {
    recorded_ = true;
#ifdef CS_WITH_NCCL
    if (cuda_) {
      check(cudaEventRecord(start_, c10::cuda::getCurrentCUDAStream().stream()));
      return;
    }
#endif
    t0_ = std::chrono::steady_clock::now();
  }
  void stop() {
#ifdef CS_WITH_NCCL
    if (cuda_) {
      check(cudaEventRecord(stop_, c10::cuda::getCurrentCUDAStream().stream()));
      return;
    }
#endif
    ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
  }
  double ms() const {
    if (!recorded_) return 0;
#ifdef CS_WITH_NCCL
    if (cuda_) {
      float ms = 0;
      check(cudaEventSynchronize(stop_));
      check(cudaEventElapsedTime(&ms, start_, stop_));
      return ms;
    }
#endif
    return ms_;
  }

 private:
#ifdef CS_WITH_NCCL
  static void check(cudaError_t e) {
    if (e != cudaSuccess) throw std::runtime_error(std::string("reducer: CUDA: ") + cudaGetErrorString(e));
  }
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
#endif
  bool cuda_;
  bool recorded_ = false;
  std::chrono::steady_clock::time_point t0_;
  double ms_ = 0;
};

// When each bucket becomes ready during backward (issue 40, docs/predict.md):
// the host clock on the CPU; on a GPU a CUDA event on the current stream at
// prepare(true) and one per bucket in on_ready, read lazily.
class ReadyClock {
 public:
  ReadyClock(torch::Device device, size_t buckets) : cuda_(device.is_cuda()), ms_(buckets, -1.0) {
#ifdef CS_WITH_NCCL
    if (cuda_) {
      c10::cuda::CUDAGuard guard(device);
      events_.assign(buckets + 1, nullptr);
      for (auto& e : events_) check(cudaEventCreate(&e));
    }
#endif
    marked_.assign(buckets, false);
  }
  ~ReadyClock() {
#ifdef CS_WITH_NCCL
    for (auto e : events_) cudaEventDestroy(e);
#endif
  }
  void start() {
    marked_.assign(marked_.size(), false);
    std::fill(ms_.begin(), ms_.end(), -1.0);
#ifdef CS_WITH_NCCL
    if (cuda_) {
      check(cudaEventRecord(events_[0], c10::cuda::getCurrentCUDAStream().stream()));
      return;
    }
#endif
    t0_ = std::chrono::steady_clock::now();
  }
  void mark(size_t b) {
    marked_[b] = true;
#ifdef CS_WITH_NCCL
    if (cuda_) {
      check(cudaEventRecord(events_[b + 1], c10::cuda::getCurrentCUDAStream().stream()));
      return;
    }
#endif
    ms_[b] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
  }
  double ms(size_t b) const {
    if (!marked_[b]) return -1;
#ifdef CS_WITH_NCCL
    if (cuda_) {
      float ms = 0;
      check(cudaEventSynchronize(events_[b + 1]));
      check(cudaEventElapsedTime(&ms, events_[0], events_[b + 1]));
      return ms;
    }
#endif
    return ms_[b];
  }

 private:
#ifdef CS_WITH_NCCL
  static void check(cudaError_t e) {
    if (e != cudaSuccess) throw std::runtime_error(std::string("reducer: CUDA: ") + cudaGetErrorString(e));
  }
  std::vector<cudaEvent_t> events_;
#endif
  bool cuda_;
  std::vector<double> ms_;
  std::vector<bool> marked_;
  std::chrono::steady_clock::time_point t0_;
};

struct Bucket {
  std::vector<size_t> params;   // indices into Reducer::params_, in bucket order
  std::vector<int64_t> offsets;  // element offset of each parameter in flat
  torch::Tensor flat;            // the gradients; each .grad() is a view of it
  int pending = 0;               // gradients not yet accumulated this backward
  bool ready = false, launched = false;
  // The collective in flight and what it reads or writes.
  std::shared_ptr<CommWork> work;
  // residual: top-k error feedback (fp32, unscaled); next_residual: what this
  // step leaves, kept by end_step unless the step is skipped.
  torch::Tensor wire, gathered, residual, next_residual;
  int64_t k = 0;
  int64_t bytes = 0;
  std::string op;
};

std::vector<int64_t> dense_strides(torch::IntArrayRef sizes) {
  std::vector<int64_t> st(sizes.size(), 1);
  for (size_t d = sizes.size(); d-- > 1;) st[d - 1] = st[d] * std::max<int64_t>(sizes[d], 1);
  return st;
}

// A gradient view's strides: the parameter's own where it is dense (a
// channels_last weight's gradient is channels_last, as autograd makes it
// without DDP and as PyTorch's DDP lays out its bucket views; the fused
// optimizers need the gradient laid out as the parameter), else row-major.
std::vector<int64_t> grad_strides(const torch::Tensor& p) {
  if (p.is_non_overlapping_and_dense()) return p.strides().vec();
  return dense_strides(p.sizes());
}

// Groups parameter indices (given in reverse registration order) into buckets:
// one open bucket per dtype and device; a bucket closes once its size reaches
// its cap (the first cap for the first bucket of its kind, then the second).
std::vector<std::vector<size_t>> assign_buckets(const std::vector<torch::Tensor>& params,
                                                int64_t first_cap, int64_t cap) {
  struct Open {
    std::vector<size_t> idx;
    int64_t bytes = 0;
    bool first = true;
  };
  std::map<std::string, Open> open;
  std::vector<std::vector<size_t>> out;
  for (size_t n = params.size(); n-- > 0;) {
    const torch::Tensor& p = params[n];
    std::string key = std::string(c10::toString(p.scalar_type())) + "/" + p.device().str();
    Open& b = open[key];
    b.idx.push_back(n);
    b.bytes += p.numel() * static_cast<int64_t>(p.element_size());
    if (b.bytes >= (b.first ? first_cap : cap)) {
      out.push_back(std::move(b.idx));
      b.idx.clear();
      b.bytes = 0;
      b.first = false;
    }
  }
  for (auto& kv : open) {
    if (!kv.second.idx.empty()) out.push_back(std::move(kv.second.idx));
  }
  return out;
}

class Reducer : public GradReducer {
 public:
  Reducer(const std::vector<torch::Tensor>& params, Communicator& comm, const DDPOptions& opts)
      : comm_(comm), opts_(opts), clock_(params.empty() ? torch::Device(torch::kCPU) : params[0].device()) {
    validate(opts);
    for (const auto& p : params) {
      if (p.requires_grad()) params_.push_back(p);
    }
    if (params_.empty()) throw ConfigError("ddp: the model has no trainable parameters");
    auto groups = assign_buckets(params_, static_cast<int64_t>(opts.first_bucket_mb * kMiB),
                                 static_cast<int64_t>(opts.bucket_mb * kMiB));
    bucket_of_.assign(params_.size(), 0);
    views_.resize(params_.size());
    torch::NoGradGuard no_grad;
    for (auto& g : groups) {
      Bucket b;
      int64_t n = 0;
      for (size_t i : g) {
        b.offsets.push_back(n);
        n += params_[i].numel();
      }
      b.params = std::move(g);
      b.flat = torch::zeros({n}, params_[b.params[0]].options().requires_grad(false));
      for (size_t j = 0; j < b.params.size(); ++j) {
        size_t i = b.params[j];
        bucket_of_[i] = buckets_.size();
        // Shares flat's storage without being an autograd view: libtorch 1.13's
        // Optimizer::zero_grad() detach_()es every .grad(), which views refuse.
        views_[i] = torch::empty({0}, b.flat.options());
        views_[i].set_(b.flat.storage(), b.offsets[j], params_[i].sizes(),
                       grad_strides(params_[i]));
      }
      buckets_.push_back(std::move(b));
    }
    ready_ = std::make_unique<ReadyClock>(params_[0].device(), buckets_.size());
    broadcast_params();
    if (opts_.overlap) {
      for (size_t i = 0; i < params_.size(); ++i) {
        auto acc = torch::autograd::impl::grad_accumulator(params_[i]);
        if (!acc) throw std::runtime_error("ddp: a parameter is not a leaf (no gradient accumulator)");
        uintptr_t key = acc->add_post_hook(std::make_unique<ReadyHook>([this, i] { on_ready(i); }));
        hooks_.emplace_back(acc, key);  // holding acc keeps the node (and hook) alive
      }
    }
  }

  ~Reducer() override {
    for (auto& h : hooks_) h.first->del_post_hook(h.second);
  }

  void prepare(bool communicate) override {
    std::lock_guard<std::mutex> lk(mu_);
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < params_.size(); ++i) {
      torch::Tensor& g = params_[i].mutable_grad();
      const torch::Tensor& v = views_[i];
      if (!g.defined()) {  // zero_grad(set_to_none) or the first step
        v.zero_();
        g = v;
      } else if (g.data_ptr() != v.data_ptr()) {  // someone replaced .grad()
        v.copy_(g);
        g = v;
      }
    }
    communicate_ = communicate;
    if (!communicate) return;
    for (auto& b : buckets_) {
      b.pending = static_cast<int>(b.params.size());
      b.ready = b.launched = false;
      b.work.reset();
    }
    next_ = 0;
    ready_->start();
    stats_ = ReducerStats{};
    stats_valid_ = false;
  }

  void finalize() override {
    std::lock_guard<std::mutex> lk(mu_);
    if (!communicate_) throw std::logic_error("ddp: finalize() without prepare(true)");
    communicate_ = false;
    torch::NoGradGuard no_grad;
    clock_.start();
    while (next_ < buckets_.size()) launch(next_++);
    double n = comm_.world_size();
    for (auto& b : buckets_) {
      b.work->wait();
      if (opts_.compression == "topk") {
        unpack_topk(b);
        b.flat.div_(n);
      } else if (opts_.compression == "none") {
        b.flat.div_(n);
      } else if (!b.wire.is_same(b.flat)) {
        b.flat.copy_(b.wire);  // fp16/bf16: divided before the cast
      }
    }
    clock_.stop();
    stats_valid_ = false;
  }

  ReducerStats stats() const override {
    std::lock_guard<std::mutex> lk(mu_);
    if (stats_valid_) return stats_;
    ReducerStats s;
    for (const auto& b : buckets_) {
      if (!b.work) continue;
      BucketStat bs;
      bs.bytes = b.bytes;
      bs.ms = b.work->elapsed_ms();
      bs.op = b.op;
      bs.ready_ms = ready_->ms(static_cast<size_t>(&b - buckets_.data()));
      s.comm_ms += bs.ms;
      s.comm_bytes += bs.bytes;
      s.collectives++;
      s.buckets.push_back(bs);
    }
    s.exposed_comm_ms = s.collectives > 0 ? clock_.ms() : 0;
    stats_ = s;
    stats_valid_ = true;
    return s;
  }

  void set_loss_scale(const torch::Tensor& scale) override {
    std::lock_guard<std::mutex> lk(mu_);
    scale_ = scale;
  }

  void end_step(const torch::Tensor& found_inf) override {
    std::lock_guard<std::mutex> lk(mu_);
    torch::NoGradGuard no_grad;
    for (auto& b : buckets_) {
      if (!b.next_residual.defined()) continue;
      if (!b.residual.defined()) b.residual = torch::zeros_like(b.next_residual);
      if (found_inf.defined())
        b.residual.copy_(torch::where(found_inf.to(torch::kBool), b.residual, b.next_residual));
      else
        b.residual.copy_(b.next_residual);
      b.next_residual = torch::Tensor();
    }
  }

  void stall_before(int bucket, int ms) override {
    std::lock_guard<std::mutex> lk(mu_);
    stall_bucket_ = std::min<int>(bucket, int(buckets_.size()) - 1);
    stall_ms_ = ms;
  }

 private:
  // fault.kind stall (stall_before): the stream that is about to launch the
  // bucket (the host on the CPU) sleeps; once.
  void stall(size_t bi) {
    if (stall_bucket_ < 0 || size_t(stall_bucket_) != bi) return;
    stall_bucket_ = -1;
    std::fprintf(stderr, "injected fault: stall of %d ms before bucket %zu\n", stall_ms_, bi);
#ifdef CS_WITH_NCCL
    if (buckets_[bi].flat.is_cuda()) {
      // The SM clock in kHz is cycles per millisecond (cudaDeviceProp's
      // clockRate is gone from CUDA 13; the attribute stays); 2 GHz, faster
      // than any GPU's clock (a longer stall), where it cannot be read.
      int khz = 0;
      if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, buckets_[bi].flat.device().index()) != cudaSuccess ||
          khz <= 0)
        khz = 2000000;
      at::cuda::sleep(int64_t(khz) * stall_ms_);
      return;
    }
#endif
    std::this_thread::sleep_for(std::chrono::milliseconds(stall_ms_));
  }

  static void validate(const DDPOptions& o) {
    if (!(o.bucket_mb > 0)) throw ConfigError("ddp.bucket_mb must be > 0, got " + std::to_string(o.bucket_mb));
    if (!(o.first_bucket_mb > 0)) {
      throw ConfigError("ddp.first_bucket_mb must be > 0, got " + std::to_string(o.first_bucket_mb));
    }
    if (o.compression != "none" && o.compression != "fp16" && o.compression != "bf16" &&
        o.compression != "topk") {
      throw ConfigError("ddp.compression must be none, fp16, bf16 or topk, got \"" + o.compression + "\"");
    }
    if (o.compression == "topk" && !(o.topk_ratio > 0 && o.topk_ratio <= 1)) {
      throw ConfigError("ddp.topk_ratio must be in (0, 1], got " + std::to_string(o.topk_ratio));
    }
  }

  // DDP's constructor: every rank starts from rank 0's weights (one broadcast per bucket).
  void broadcast_params() {
    for (auto& b : buckets_) {
      for (size_t j = 0; j < b.params.size(); ++j) views_[b.params[j]].copy_(params_[b.params[j]]);
      comm_.broadcast(b.flat, 0);
      for (size_t j = 0; j < b.params.size(); ++j) params_[b.params[j]].copy_(views_[b.params[j]]);
      b.flat.zero_();
    }
  }

  // Autograd has accumulated parameter i's gradient (may run on an autograd thread).
  void on_ready(size_t i) {
    std::lock_guard<std::mutex> lk(mu_);
    if (!communicate_) return;  // grad_accum: an earlier micro-batch
    Bucket& b = buckets_[bucket_of_[i]];
    if (b.pending > 0 && --b.pending == 0) {
      b.ready = true;
      ready_->mark(bucket_of_[i]);
    }
    torch::NoGradGuard no_grad;
    while (next_ < buckets_.size() && buckets_[next_].ready) launch(next_++);
  }

  void launch(size_t bi) {
    Bucket& b = buckets_[bi];
    b.launched = true;
    stall(bi);
    commwatch::bucket(int(bi));
    const std::string& c = opts_.compression;
    double n = comm_.world_size();
    if (c == "none") {
      b.wire = b.flat;
    } else if (c == "fp16" || c == "bf16") {
      auto dt = c == "fp16" ? torch::kHalf : torch::kBFloat16;
      // Divide first so the sum cannot overflow fp16 (DDP's fp16 compress hook).
      b.wire = b.flat.scalar_type() == dt ? b.flat.div_(n) : b.flat.div(n).to(dt);
    } else {
      launch_topk(b);
      return;
    }
    b.op = "all_reduce";
    b.bytes = comm_.wire_bytes(b.wire);
    b.work = comm_.all_reduce_sum(b.wire);
  }

  // Top-k with error feedback: add the residual, keep the k largest entries by
  // magnitude, carry the rest to the next step, and all-gather (index, value)
  // pairs packed into one int32 tensor [k indices | k fp32 value bits].
  // The residual is kept unscaled (divided by the loss scale the step's
  // gradients carry) and becomes the bucket's only in end_step.
  void launch_topk(Bucket& b) {
    int64_t numel = b.flat.numel();
    if (!b.residual.defined()) b.residual = torch::zeros({numel}, b.flat.options().dtype(torch::kFloat));
    torch::Tensor acc = b.flat.to(torch::kFloat, /*non_blocking=*/false, /*copy=*/true);  // flat is overwritten by unpack_topk
    acc = scale_.defined() ? acc.add_(b.residual * scale_.to(torch::kFloat)) : acc.add_(b.residual);
    b.k = std::min<int64_t>(numel, std::max<int64_t>(1, static_cast<int64_t>(std::ceil(opts_.topk_ratio * numel))));
    torch::Tensor idx = std::get<1>(acc.abs().topk(b.k, 0, true, false));
    torch::Tensor vals = acc.index_select(0, idx);
    acc.index_fill_(0, idx, 0);  // error feedback: what was not sent
    b.next_residual = scale_.defined() ? acc.div_(scale_.to(torch::kFloat)) : acc;
    b.wire = torch::cat({idx.to(torch::kInt), vals.contiguous().view(torch::kInt)});
    b.gathered = torch::empty({b.wire.numel() * comm_.world_size()}, b.wire.options());
    b.op = "all_gather";
    b.bytes = comm_.wire_bytes(b.gathered);
    b.work = comm_.all_gather(b.wire, b.gathered);
  }

  // Sums every rank's (index, value) pairs into flat, rank by rank, so every
  // rank adds in the same order (no atomics) and ends bit-identical.
  void unpack_topk(Bucket& b) {
    b.flat.zero_();
    torch::Tensor g = b.gathered.view({comm_.world_size(), 2 * b.k});
    for (int r = 0; r < comm_.world_size(); ++r) {
      torch::Tensor idx = g[r].narrow(0, 0, b.k).to(torch::kLong);
      torch::Tensor vals = g[r].narrow(0, b.k, b.k).contiguous().view(torch::kFloat).to(b.flat.scalar_type());
      b.flat.index_copy_(0, idx, b.flat.index_select(0, idx) + vals);
    }
  }

  Communicator& comm_;
  DDPOptions opts_;
  std::vector<torch::Tensor> params_;
  std::vector<torch::Tensor> views_;
  std::vector<size_t> bucket_of_;
  std::vector<Bucket> buckets_;
  std::vector<std::pair<std::shared_ptr<torch::autograd::Node>, uintptr_t>> hooks_;
  mutable std::mutex mu_;
  bool communicate_ = false;
  size_t next_ = 0;  // the next bucket to launch
  int stall_bucket_ = -1, stall_ms_ = 0;  // fault.kind stall, armed for one step
  torch::Tensor scale_;                   // the loss scale of this step's gradients (fp16)
  WaitClock clock_;
  std::unique_ptr<ReadyClock> ready_;
  mutable ReducerStats stats_;
  mutable bool stats_valid_ = false;
};

}  // namespace

std::unique_ptr<GradReducer> make_reducer(const std::vector<torch::Tensor>& params, Communicator& comm,
                                          const DDPOptions& opts) {
  return std::make_unique<Reducer>(params, comm, opts);
}

}  // namespace cs
