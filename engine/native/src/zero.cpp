// zero.cpp: ZeRO-1 and ZeRO-2 (zero.h), and the Communicator's default
// reduce-scatter (dist.h).
#include "zero.h"

#include <torch/csrc/autograd/variable.h>

#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <algorithm>
#include <mutex>
#include <unordered_map>

#include "comm_watch.h"
#include "compat.h"
#include "host_queue.h"
#include "model.h"
#include "pipeline_group.h"
#include "tp.h"
#include "zero_layout.h"

namespace cs {

namespace {

// The default reduce-scatter: an all-reduce of in, then block rank of it into out.
class BlockOfSum : public CommWork {
 public:
  BlockOfSum(std::shared_ptr<CommWork> w, torch::Tensor in, torch::Tensor out, int rank)
      : w_(std::move(w)), in_(std::move(in)), out_(std::move(out)), rank_(rank) {}
  void wait() override {
    w_->wait();
    if (copied_) return;
    torch::NoGradGuard ng;
    out_.copy_(in_.narrow(0, rank_ * out_.numel(), out_.numel()));
    copied_ = true;
  }
  double elapsed_ms() override { return w_->elapsed_ms(); }

 private:
  std::shared_ptr<CommWork> w_;
  torch::Tensor in_, out_;
  int rank_;
  bool copied_ = false;
};

}  // namespace

std::shared_ptr<CommWork> Communicator::reduce_scatter_sum(torch::Tensor in, torch::Tensor out) {
  if (in.numel() != out.numel() * world_size() || in.scalar_type() != out.scalar_type() ||
      !in.is_contiguous() || !out.is_contiguous())
    throw CommError("reduce_scatter: in must be contiguous and hold world_size x out's elements of its dtype");
  return std::make_shared<BlockOfSum>(all_reduce_sum(in), in, out, rank());
}

namespace {

// A synchronous group collective's work: done when made, timed by its two marks.
class GroupWork : public CommWork {
 public:
  explicit GroupWork(std::unique_ptr<Timeline> t) : t_(std::move(t)) {}
  void wait() override {}
  double elapsed_ms() override {
    if (!finished_) t_->finish(1);
    finished_ = true;
    return t_->ms(0, 1);
  }

 private:
  std::unique_ptr<Timeline> t_;
  bool finished_ = false;
};

// The thread's slack past the collective deadline: the group's own timeout fires first.
constexpr int kQueueSlackMS = 20000;

class GroupCommunicator : public Communicator {
 public:
  GroupCommunicator(PipeGroup& g, torch::Device device, std::string backend, std::string version,
                    PipeGroup* async)
      : g_(g), device_(device), backend_(std::move(backend)), version_(std::move(version)), async_(async) {
    if (!async_) return;
    queue_ = std::make_unique<HostQueue>("zero data group", commwatch::deadline_ms() + kQueueSlackMS);
    if (device_.is_cuda()) {
      c10::impl::VirtualGuardImpl impl(device_.type());
      if (!device_.has_index()) device_ = impl.getDevice();
      side_ = impl.getStreamFromGlobalPool(device_, /*isHighPriority=*/true);
    }
  }
  ~GroupCommunicator() override { queue_.reset(); }  // its thread first: it uses async_
  int rank() const override { return g_.rank(); }
  int world_size() const override { return g_.size(); }
  std::string backend() const override { return backend_; }
  std::string version() const override { return version_; }
  std::shared_ptr<CommWork> all_reduce_sum(torch::Tensor t) override {
    return timed([&] { g_.all_reduce_sum(t); });
  }
  std::shared_ptr<CommWork> all_gather(torch::Tensor in, torch::Tensor out) override {
    if (!async_) return timed([&] { g_.all_gather(in, out); });
    // On a GPU the gather runs on the side stream after what the caller's
    // stream has queued (in's copy): a ready event. The closure keeps in and
    // out alive until the gather is done.
    std::shared_ptr<c10::Event> ready;
    if (side_) {
      c10::impl::VirtualGuardImpl impl(device_.type());
      ready = std::make_shared<c10::Event>(device_.type());
      ready->record(impl.getStream(device_));
    }
    PipeGroup* g = async_;
    c10::optional<c10::Stream> side = side_;
    // The queue's work: wait() returns when the group's call has returned,
    // the bytes in place (the group's collectives block until done, on the
    // device too); elapsed_ms on the host clock from its start on the thread.
    return queue_->submit([g, in, out, ready, side] {
      c10::OptionalStreamGuard sg;
      if (side) {
        sg.reset_stream(*side);
        ready->block(*side);
      }
      g->all_gather(in, out);
    });
  }
  std::shared_ptr<CommWork> reduce_scatter_sum(torch::Tensor in, torch::Tensor out) override {
    return timed([&] { g_.reduce_scatter_sum(in, out); });
  }
  void broadcast(torch::Tensor t, int root) override {
    torch::NoGradGuard ng;
    torch::Tensor in = t.contiguous().reshape({-1});
    torch::Tensor all = torch::empty({in.numel() * g_.size()}, in.options());
    g_.all_gather(in, all);
    t.copy_(all.narrow(0, int64_t(root) * in.numel(), in.numel()).view(t.sizes()));
  }
  void send(torch::Tensor t, int peer) override { g_.exchange({P2POp{true, t, peer, 0}}); }
  void recv(torch::Tensor t, int peer) override { g_.exchange({P2POp{false, t, peer, 0}}); }
  void barrier() override {
    g_.all_reduce_sum(torch::zeros({1}, torch::TensorOptions().dtype(torch::kFloat32).device(device_)));
  }

 private:
  template <class F>
  std::shared_ptr<CommWork> timed(F&& call) {
    auto t = make_timeline(device_, 2);
    t->mark(0);
    call();
    t->mark(1);
    return std::make_shared<GroupWork>(std::move(t));
  }

  PipeGroup& g_;
  torch::Device device_;
  std::string backend_, version_;
  PipeGroup* async_;                   // the untimed group of the queued all-gathers
  std::unique_ptr<HostQueue> queue_;   // their thread, in issue order
  c10::optional<c10::Stream> side_;    // GPU: their stream
};

}  // namespace

std::unique_ptr<Communicator> group_communicator(PipeGroup& g, torch::Device device,
                                                 std::string backend, std::string version,
                                                 PipeGroup* async) {
  return std::make_unique<GroupCommunicator>(g, device, std::move(backend), std::move(version), async);
}

void check_zero(const EngineConfig& cfg) {
  const int stage = cfg.zero.stage;
  if (stage == 0) return;
  const std::string what = "zero.stage " + std::to_string(stage);
  if (cfg.pipeline.stages > 1)
    throw UnsupportedError(what + " with pipeline.stages > 1 is not supported yet (ZeRO shards "
                                  "over the data-parallel ranks of a plain data-parallel run)");
  if (cfg.dist.world_size <= 1 && cfg.dist.backend.empty())
    throw UnsupportedError(what + " needs data parallel ranks (dist.world_size > 1, or "
                                  "dist.backend set for a world of one)");
  if (stage == 2 && cfg.ddp.compression != "none")
    throw UnsupportedError("zero.stage 2 reduce-scatters fp32 gradients: ddp.compression " +
                           cfg.ddp.compression + " is not supported with it (use stage 1)");
}

// zero_layout.h.
torch::Tensor view_as_in(const torch::Tensor& flat, int64_t offset, const torch::Tensor& like) {
  std::vector<int64_t> st;
  if (like.is_non_overlapping_and_dense()) {
    st = like.strides().vec();
  } else {
    st.assign(like.dim(), 1);
    for (int64_t d = like.dim() - 1; d > 0; d--) st[d - 1] = st[d] * std::max<int64_t>(like.size(d), 1);
  }
  auto v = torch::empty({0}, flat.options());
  v.set_(flat.storage(), flat.storage_offset() + offset, like.sizes(), st);
  return v;
}

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// Every parameter starts, and every block starts and ends, at a multiple of
// kAlign elements of the parameter's own start. A CPU kernel's vector loop and
// its scalar tail can round differently (fmadd against a multiply and an add),
// and which elements fall in the tail depends on the position in the tensor:
// with pieces aligned so, each piece's tail is its parameter's tail, every
// element takes the same path as in DDP's per-parameter update, and ZeRO-1
// stays bit-identical to DDP (one thread; 64 covers AVX-512's unrolled loop).
constexpr int64_t kAlign = 64;

int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

torch::Tensor range_of(const torch::Tensor& t, int64_t offset, int64_t len) {
  auto v = torch::empty({0}, t.options());
  const std::vector<int64_t> size{len}, stride{1};
  v.set_(t.storage(), t.storage_offset() + offset, size, stride);
  return v;
}

// DDP's bucket assignment (reducer.cpp assign_buckets) for one dtype: reverse
// registration order, a bucket closes once it reaches its cap.
std::shared_ptr<ZeroLayout> make_layout(const std::vector<torch::Tensor>& params, int world,
                                        int rank, const DDPOptions& ddp) {
  auto L = std::make_shared<ZeroLayout>();
  L->world = world;
  L->rank = rank;
  L->params = params;
  const auto dtype = params[0].scalar_type();
  const auto device = params[0].device();
  for (const auto& p : params)
    if (p.scalar_type() != torch::kFloat32 || p.device() != device)
      throw UnsupportedError("zero: every trainable parameter must be fp32 on one device");
  const int64_t first_cap = int64_t(ddp.first_bucket_mb * kMiB), cap = int64_t(ddp.bucket_mb * kMiB);
  ZeroLayout::Bucket open;
  int64_t bytes = 0;
  bool first = true;
  auto close = [&] {
    if (open.params.empty()) return;
    open.padded = round_up(open.numel, world * kAlign);
    open.block = open.padded / world;
    L->buckets.push_back(open);
    open = ZeroLayout::Bucket{};
    bytes = 0;
  };
  for (size_t n = params.size(); n-- > 0;) {
    open.params.push_back(n);
    open.numel += round_up(params[n].numel(), kAlign);
    bytes += params[n].numel() * 4;
    if (bytes >= (first ? first_cap : cap)) {
      close();
      first = false;
    }
  }
  close();
  int64_t total = 0;
  for (auto& b : L->buckets) {
    b.offset = total;
    total += b.padded;
  }
  L->flat = torch::zeros({total}, torch::TensorOptions().dtype(dtype).device(device));
  L->at.assign(params.size(), 0);
  L->bucket_of.assign(params.size(), 0);
  torch::NoGradGuard ng;
  for (size_t bi = 0; bi < L->buckets.size(); bi++) {
    int64_t off = L->buckets[bi].offset;
    for (size_t i : L->buckets[bi].params) {
      L->at[i] = off;
      L->bucket_of[i] = bi;
      auto& p = L->params[i];
      torch::Tensor v = view_as_in(L->flat, off, p);
      v.copy_(p);
      p.set_data(v);  // every holder of the parameter now reads the flat buffer
      off += round_up(p.numel(), kAlign);
    }
  }
  return L;
}

}  // namespace

ZeroOptimizer::ZeroOptimizer(const std::vector<torch::Tensor>& params, const std::vector<bool>& decays,
                             Communicator& comm, const ZeroOptions& z, const DDPOptions& ddp,
                             const OptimOptions& o, const ZeroTensorParallel* tp)
    : comm_(comm), z_(z), ddp_(ddp) {
  if (tp && tp->sharded.size() != params.size())
    throw std::logic_error("zero: ZeroTensorParallel::sharded must have one entry per parameter");
  tp_ = tp != nullptr;
  if (tp) tensor_ = tp->tensor;
  std::vector<torch::Tensor> trainable;
  std::vector<bool> decay;
  for (size_t i = 0; i < params.size(); i++)
    if (params[i].requires_grad()) {
      trainable.push_back(params[i]);
      decay.push_back(decays[i]);
      if (tp) sharded_.push_back(tp->sharded[i]);
    }
  if (trainable.empty()) throw ConfigError("zero: the model has no trainable parameters");
  layout_ = make_layout(trainable, comm.world_size(), comm.rank(), ddp);
  const ZeroLayout& L = *layout_;
  torch::NoGradGuard ng;
  std::vector<torch::Tensor> with_decay, without;
  for (size_t bi = 0; bi < L.buckets.size(); bi++) {
    const auto& b = L.buckets[bi];
    const int64_t lo = L.block_begin(b), hi = lo + b.block;
    for (size_t i : b.params) {
      const int64_t a = std::max(lo, L.at[i]), e = std::min(hi, L.at[i] + L.params[i].numel());
      if (a >= e) continue;
      pieces_.push_back({i, bi, a, e - a});
      piece_params_.push_back(range_of(L.flat, a, e - a));
      (decay[i] ? with_decay : without).push_back(piece_params_.back());
    }
    if (z_.stage == 2) shard_grads_.push_back(torch::zeros({b.block}, L.flat.options()));
  }
  if (pieces_.empty())
    throw UnsupportedError("zero: rank " + std::to_string(L.rank) + " of " + std::to_string(L.world) +
                           " holds no parameters (a model this small has too few elements per bucket)");
  optim_ = std::make_unique<Optimizer>(with_decay, without, o);
  clock_ = make_timeline(L.flat.device(), 2);
  // Without set_forward_order: the last bucket (the first layers') first.
  for (size_t b = L.buckets.size(); b-- > 0;) order_.push_back(b);
  round_.reset(L.buckets.size());
  last_.reset(L.buckets.size());
}

// After a communication failure the outstanding gathers may never end: they
// are left to the communicator's teardown.
ZeroOptimizer::~ZeroOptimizer() {
  if (commwatch::has_failed()) return;
  try {
    drain();
  } catch (...) {
  }
}

void ZeroOptimizer::Round::reset(size_t buckets) {
  works.assign(buckets, nullptr);
  bytes.assign(buckets, 0);
  sends.assign(buckets, torch::Tensor());
  waited.assign(buckets, true);
  pairs.clear();
  sync = false;
}

void ZeroOptimizer::set_forward_order(const std::vector<std::vector<torch::Tensor>>& layers) {
  const ZeroLayout& L = *layout_;
  if (layers.empty()) throw std::logic_error("zero: set_forward_order needs the loss's entry");
  if (!z_.overlap_gather) return;
  std::unordered_map<const void*, size_t> index;  // set_data kept each parameter's TensorImpl
  for (size_t i = 0; i < L.params.size(); i++) index[L.params[i].unsafeGetTensorImpl()] = i;
  std::vector<bool> seen(L.buckets.size(), false);
  order_.clear();
  wait_points_.clear();
  first_.assign(layers.size(), {});
  const size_t loss = layers.size() - 1;
  for (size_t l = 0; l < layers.size(); l++) {
    for (const auto& p : layers[l]) {
      auto it = index.find(p.unsafeGetTensorImpl());
      if (it == index.end()) continue;  // frozen: not in the flat buffer
      const size_t b = L.bucket_of[it->second];
      if (seen[b]) continue;
      seen[b] = true;
      first_[l].push_back(b);
      order_.push_back(b);
    }
    if (l < loss && (l == 0 || !first_[l].empty())) wait_points_.push_back(int64_t(l));
  }
  // A bucket no layer and not the loss lists (a model's layer_parameters that
  // missed a parameter): waited for before the first layer, issued first, so
  // nothing can read it before it is in.
  for (size_t b = L.buckets.size(); b-- > 0;)
    if (!seen[b]) {
      first_[0].insert(first_[0].begin(), b);
      order_.insert(order_.begin(), b);
    }
  for (Round* r : {&round_, &last_}) r->clock = make_timeline(L.flat.device(), int(2 * layers.size()));
}

void ZeroOptimizer::wait_bucket(Round& r, size_t b) {
  if (r.waited[b]) return;
  r.works[b]->wait();  // CPU: the host waits; GPU: the compute stream waits on its event
  r.waited[b] = true;
  r.sends[b] = torch::Tensor();  // later work on the compute stream is ordered after the gather
}

void ZeroOptimizer::wait_layer(int64_t l) {
  if (l < 0 || size_t(l) >= first_.size()) throw std::out_of_range("zero: wait_layer " + std::to_string(l));
  Round& r = round_;
  bool pending = false;
  for (size_t b : first_[size_t(l)]) pending = pending || !r.waited[b];
  if (!pending) return;
  const int k = int(l);
  r.clock->mark(2 * k);
  for (size_t b : first_[size_t(l)]) wait_bucket(r, b);
  r.clock->mark(2 * k + 1);
  r.pairs.push_back(k);
}

void ZeroOptimizer::drain() {
  for (size_t b : order_) wait_bucket(round_, b);
}

void ZeroOptimizer::issue_gathers(Round& r) {
  const ZeroLayout& L = *layout_;
  for (size_t b : order_) {
    const auto& bk = L.buckets[b];
    r.sends[b] = L.flat.narrow(0, L.block_begin(bk), bk.block).clone();
    torch::Tensor out = L.flat.narrow(0, bk.offset, bk.padded);
    r.works[b] = comm_.all_gather(r.sends[b], out);
    r.bytes[b] = comm_.wire_bytes(out);
    r.waited[b] = false;
  }
}

torch::Tensor forward_loss_waiting(Model& model, ZeroOptimizer& zero, const Batch& b) {
  const auto& at = zero.wait_points();
  const int64_t n = model.num_layers();
  torch::Tensor x;
  for (size_t k = 0; k < at.size(); k++) {
    zero.wait_layer(at[k]);
    x = model.forward_layers(at[k], k + 1 < at.size() ? at[k + 1] : n, x, b);
  }
  zero.wait_layer(n);
  return model.loss(x, b);
}

std::unique_ptr<GradReducer> ZeroOptimizer::make_reducer() {
  if (z_.stage == 1) return cs::make_reducer(layout_->params, comm_, ddp_);
  return make_scatter_reducer(layout_, shard_grads_, comm_, ddp_);
}

std::vector<torch::Tensor> ZeroOptimizer::piece_grads() {
  const ZeroLayout& L = *layout_;
  std::vector<torch::Tensor> grads;
  for (size_t k = 0; k < pieces_.size(); k++) {
    const Piece& pc = pieces_[k];
    torch::Tensor g;
    if (z_.stage == 2) {
      g = shard_grads_[pc.bucket].narrow(0, pc.begin - L.block_begin(L.buckets[pc.bucket]), pc.len);
    } else {
      const torch::Tensor& p = L.params[pc.param];
      const torch::Tensor& full = p.grad();
      // The DDP reducer lays each gradient out as its parameter (dense): the
      // piece's elements sit at the same memory positions in both.
      if (!full.defined() || full.strides() != p.strides())
        throw std::logic_error("zero: a gradient is missing or not laid out as its parameter");
      g = range_of(full, pc.begin - L.at[pc.param], pc.len);
    }
    piece_params_[k].mutable_grad() = g;
    grads.push_back(g);
  }
  return grads;
}

ClipResult ZeroOptimizer::step(const torch::Tensor& inv_scale, double max_norm, bool can_skip) {
  torch::NoGradGuard ng;
  drain();  // the forward waited for every bucket already, unless it did not run layer by layer
  const ZeroLayout& L = *layout_;
  const auto device = L.flat.device();
  std::vector<torch::Tensor> grads = piece_grads();
  torch::Tensor sumsq;
  if (z_.stage == 1) {  // every rank holds the averaged gradients: DDP's norm, no collective
    std::vector<torch::Tensor> all, sharded, replicated;
    for (size_t i = 0; i < L.params.size(); i++) {
      const torch::Tensor& g = L.params[i].grad();
      if (!g.defined()) continue;
      all.push_back(g);
      if (tp_) (sharded_[i] ? sharded : replicated).push_back(g);
    }
    // Under tp: the trainer's tp clip, term for term (tensor group only).
    sumsq = tp_ ? tp::tensor_parallel_sumsq(grad_sumsq(sharded, device), grad_sumsq(replicated, device), tensor_)
                : grad_sumsq(all, device);
    norm_work_.reset();
  } else if (tp_) {
    // The blocks' sums of squares, tensor-sharded and replicated apart, in
    // one float64 all-reduce over the data group; then the sharded sum over
    // the tensor group. A non-finite block (fp16's found_inf) makes both
    // sums, and so the norm, non-finite on every rank of both groups.
    std::vector<torch::Tensor> sharded, replicated;
    for (size_t k = 0; k < pieces_.size(); k++) (sharded_[pieces_[k].param] ? sharded : replicated).push_back(grads[k]);
    torch::Tensor buf = torch::stack({grad_sumsq(sharded, device), grad_sumsq(replicated, device)}).contiguous();
    norm_work_ = comm_.all_reduce_sum(buf);
    norm_work_->wait();
    sumsq = tp::tensor_parallel_sumsq(buf[0], buf[1], tensor_);
  } else {
    torch::Tensor buf = grad_sumsq(grads, device).reshape({1}).contiguous();
    norm_work_ = comm_.all_reduce_sum(buf);
    norm_work_->wait();
    sumsq = buf.reshape({});
  }
  const bool fold = optim_->folds_grad_coef();
  ClipResult clip = clip_grads(grads, sumsq, inv_scale, max_norm, /*apply=*/!fold);
  optim_->step(can_skip ? clip.found_inf : torch::Tensor(), fold ? clip.coef : torch::Tensor());

  // Every rank's updated blocks back into every rank's flat buffer: with
  // overlap issued only (the next forward waits bucket by bucket; last_ is
  // then the round this step's forward waited for), else waited for here.
  if (overlapping()) {
    std::swap(last_, round_);
    round_.reset(L.buckets.size());
    issue_gathers(round_);
  } else {
    round_.reset(L.buckets.size());
    clock_->mark(0);
    issue_gathers(round_);
    drain();
    clock_->mark(1);
    round_.sync = true;
    std::swap(last_, round_);
  }
  // Written behind autograd's back: what reads versions (LinearCasts' cached
  // casts) must see new values. With overlap before the bytes land: nothing
  // reads a parameter before its layer's wait.
  for (const auto& p : L.params) torch::autograd::impl::bump_version(p);
  return clip;
}

void ZeroOptimizer::add_metrics(nlohmann::json& m, bool totals) const {
  double ms = 0;
  int64_t bytes = 0;
  int n = 0;
  nlohmann::json buckets = m.contains("buckets") ? m["buckets"] : nlohmann::json::array();
  const int world = layout_->world;
  auto add = [&](const BucketStat& b) {
    ms += b.ms;
    bytes += b.bytes;
    n++;
    buckets.push_back({{"bytes", b.bytes},
                       {"ms", b.ms},
                       {"op", b.op},
                       {"algbw_gbs", algbw_gbs(b)},
                       {"busbw_gbs", busbw_gbs(b, world)}});
  };
  if (norm_work_) add({tp_ ? 16 : 8, norm_work_->elapsed_ms(), "all_reduce"});
  const Round& r = last_;
  double gather_ms = 0, wait = 0;
  int64_t gather_bytes = 0;
  int gathers = 0;
  for (size_t b : order_) {
    if (!r.works[b]) continue;
    const BucketStat s{r.bytes[b], r.works[b]->elapsed_ms(), "all_gather"};
    add(s);
    gather_ms += s.ms;
    gather_bytes += s.bytes;
    gathers++;
  }
  if (r.sync && gathers > 0) {
    clock_->finish(1);
    wait = clock_->ms(0, 1);  // the step waited for the whole all-gather
  } else if (!r.pairs.empty()) {
    r.clock->finish(2 * r.pairs.back() + 1);
    for (int k : r.pairs) wait += r.clock->ms(2 * k, 2 * k + 1);  // the forward's stalls
  }
  m["buckets"] = buckets;
  m["gather_wait_ms"] = wait;
  if (totals) {
    m["comm_ms"] = m.value("comm_ms", 0.0) + ms;
    m["exposed_comm_ms"] = m.value("exposed_comm_ms", 0.0) + wait;
    m["comm_bytes"] = m.value("comm_bytes", int64_t(0)) + bytes;
    m["collectives"] = m.value("collectives", 0) + n;
    // The wait is a part of its own (exposed_comm_ms): out of the phase it ran
    // in, the step's (optimizer_ms) or the forward's, as tensor parallelism's.
    const char* phase = r.sync ? "optimizer_ms" : "forward_ms";
    m[phase] = std::max(0.0, m.value(phase, 0.0) - wait);
    return;
  }
  if (r.sync) return;  // tp without overlap: the data group's timer counted the all-gathers
  // tp with overlap: the all-gathers ran on the untimed group.
  m["comm_ms"] = m.value("comm_ms", 0.0) + gather_ms;
  m["exposed_comm_ms"] = m.value("exposed_comm_ms", 0.0) + wait;
  m["comm_bytes"] = m.value("comm_bytes", int64_t(0)) + gather_bytes;
  m["collectives"] = m.value("collectives", int64_t(0)) + gathers;
  m["forward_ms"] = std::max(0.0, m.value("forward_ms", 0.0) - wait);
}

nlohmann::json ZeroOptimizer::info() const {
  const ZeroLayout& L = *layout_;
  int64_t owned = 0;
  for (const auto& pc : pieces_) owned += pc.len;
  return {{"stage", z_.stage},
          {"buckets", L.buckets.size()},
          {"tensors", L.params.size()},
          {"flat_numel", L.flat.numel()},
          {"owned_numel", owned},
          {"ranks", L.world},
          {"group", tp_ ? "data" : "world"},
          {"overlap_gather", overlapping()},
          {"wait_points", wait_points_.size()},
          {"state_bytes", optim_->state_bytes()}};
}

std::string ZeroOptimizer::implementation() const { return optim_->implementation(); }

int64_t ZeroOptimizer::state_bytes() const { return optim_->state_bytes(); }

}  // namespace cs
