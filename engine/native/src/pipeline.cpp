// pipeline.cpp: stages, the GPipe and 1F1B schedules, and the reductions after
// them (pipeline.h, docs/pipeline.md). The schedules follow Megatron-LM's
// forward_backward_pipelining_without_interleaving: every point-to-point call
// is one batch of sends and receives posted together, so neighbours that send
// to each other in the same call cannot deadlock.
#include "pipeline.h"

#include <ATen/record_function.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "optim.h"
#include "precision.h"
#include "tp_model.h"

namespace cs {

using json = nlohmann::json;

namespace {

constexpr int kMaxDims = 8;
constexpr int kHeaderTag = 1 << 29;  // the activation's shape, before the first one
constexpr int kTiedTag = 1 << 28;
int act_tag(int i) { return 2 * i; }
int grad_tag(int i) { return 2 * i + 1; }

int64_t nbytes(const torch::Tensor& t) {
  return t.defined() ? t.numel() * int64_t(t.element_size()) : 0;
}

std::string join(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

}  // namespace

std::vector<int> balance_by_weight(const std::vector<double>& w, int stages) {
  const int n = int(w.size());
  if (stages < 1 || stages > n)
    throw std::logic_error("balance_by_weight: " + std::to_string(stages) + " stages for " +
                           std::to_string(n) + " layers");
  std::vector<double> pre(n + 1, 0);
  for (int i = 0; i < n; i++) pre[i + 1] = pre[i] + w[i];
  const double inf = std::numeric_limits<double>::infinity();
  // best[k][j]: the lightest heaviest stage putting layers [0, j) on k stages.
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int>> cut(stages + 1, std::vector<int>(n + 1, 0));
  best[0][0] = 0;
  for (int k = 1; k <= stages; k++)
    for (int j = k; j <= n; j++)
      for (int i = k - 1; i < j; i++) {
        const double v = std::max(best[k - 1][i], pre[j] - pre[i]);
        if (v < best[k][j]) best[k][j] = v, cut[k][j] = i;
      }
  std::vector<int> out(stages);
  for (int k = stages, j = n; k >= 1; k--) {
    out[k - 1] = j - cut[k][j];
    j = cut[k][j];
  }
  return out;
}

struct Pipeline::Slot {
  torch::Tensor input;   // received activation, a leaf (undefined on the first stage)
  torch::Tensor output;  // stage output; on the last stage the scaled loss
  int64_t bytes = 0;     // activation memory counted for this micro-batch
};

// Timeline marks of one step and the totals derived from them.
struct Pipeline::Stats {
  std::vector<std::pair<int, int>> fwd, bwd, p2p, coll;
  int win_a = 0, win_b = 0;
  int64_t p2p_bytes = 0, coll_bytes = 0, live = 0, act_peak = 0;
  int collectives = 0;
  double fwd_ms = 0, bwd_ms = 0, p2p_ms = 0, coll_ms = 0, window_ms = 0;
};

Pipeline::Pipeline(const EngineConfig& cfg, Model& model, torch::Device device,
                   std::vector<double> layer_ms)
    : model_(model), device_(device), precision_(cfg.precision), schedule_(cfg.pipeline.schedule),
      stages_(cfg.pipeline.stages), layer_ms_(std::move(layer_ms)) {
  const int world = cfg.dist.world_size;
  const std::string what = cfg.model.family + " " + cfg.model.preset;
  if (cfg.tp.degree > 1) {  // the tensor mesh's layout: tensor-fastest, then data, then pipeline
    tp::Mesh mesh;
    try {
      mesh = tp::Mesh::of(world, cfg.tp.degree, stages_);
    } catch (const std::invalid_argument&) {
      throw ConfigError("tp.degree " + std::to_string(cfg.tp.degree) + " x pipeline.stages " +
                        std::to_string(stages_) + " must divide dist.world_size " + std::to_string(world) +
                        " (ranks = tensor x data-parallel x pipeline)");
    }
    const tp::MeshCoords at = mesh.coords(cfg.dist.rank);
    stage_ = at.pipe;
    dp_rank_ = at.data;
    dp_size_ = mesh.dp;
  } else {
    if (world % stages_ != 0)
      throw ConfigError("pipeline.stages " + std::to_string(stages_) + " must divide dist.world_size " +
                        std::to_string(world) + " (ranks = stages x data-parallel replicas)");
    stage_ = cfg.dist.rank % stages_;
    dp_rank_ = cfg.dist.rank / stages_;
    dp_size_ = world / stages_;
  }
  const int64_t L = model.num_layers();
  if (stages_ > L)
    throw ConfigError("pipeline.stages " + std::to_string(stages_) + " exceeds the " + std::to_string(L) +
                      " pipeline layers of " + what + " (embeddings, blocks, head); use fewer stages or more layers");

  std::unordered_map<const void*, int64_t> layer_of;
  std::vector<double> weights(size_t(L), 0.0);
  for (int64_t l = 0; l < L; l++)
    for (const auto& p : model.layer_parameters(l)) {
      layer_of[p.unsafeGetTensorImpl()] = l;
      weights[size_t(l)] += double(p.numel());
    }
  const auto loss_params = model.loss_parameters();
  for (const auto& p : loss_params) weights[size_t(L - 1)] += double(p.numel());  // the head runs last

  if (!layer_ms_.empty() && int64_t(layer_ms_.size()) != L)
    throw std::logic_error("pipeline: " + std::to_string(layer_ms_.size()) +
                           " measured layer times for " + std::to_string(L) + " layers");
  if (!cfg.pipeline.balance.empty()) {
    balance_ = cfg.pipeline.balance, balance_by_ = "manual";
  } else if (!layer_ms_.empty()) {
    balance_ = balance_by_weight(layer_ms_, stages_), balance_by_ = "time";
  } else {
    balance_ = balance_by_weight(weights, stages_), balance_by_ = "params";
  }
  const int64_t covered = std::accumulate(balance_.begin(), balance_.end(), int64_t(0));
  if (int(balance_.size()) != stages_ || covered != L)
    throw ConfigError("pipeline.balance " + join(balance_) + " must give each of the " +
                      std::to_string(stages_) + " stages its layers, " + std::to_string(L) +
                      " in all for " + what + "; it covers " + std::to_string(covered));
  std::vector<int64_t> start(size_t(stages_) + 1, 0);
  for (int s = 0; s < stages_; s++) start[size_t(s) + 1] = start[size_t(s)] + balance_[size_t(s)];
  first_layer_ = start[size_t(stage_)];
  last_layer_ = start[size_t(stage_) + 1];
  auto stage_of = [&](int64_t layer) {
    return int(std::upper_bound(start.begin(), start.end(), layer) - start.begin()) - 1;
  };

  for (int64_t l = first_layer_; l < last_layer_; l++)
    for (const auto& p : model.layer_parameters(l)) {
      held_.insert(p.unsafeGetTensorImpl());
      owned_.insert(p.unsafeGetTensorImpl());
    }
  for (size_t k = 0; k < loss_params.size(); k++) {
    const auto& p = loss_params[k];
    auto it = layer_of.find(p.unsafeGetTensorImpl());
    if (it == layer_of.end())
      throw std::logic_error("pipeline: a parameter loss() reads belongs to no layer");
    const int owner = stage_of(it->second);
    if (owner == stages_ - 1) continue;  // the last stage owns it already
    if (last()) {
      held_.insert(p.unsafeGetTensorImpl());
      tied_.push_back({p, owner, kTiedTag + int(k)});
    } else if (stage_ == owner) {
      tied_.push_back({p, stages_ - 1, kTiedTag + int(k)});
    }
  }
  for (const auto& p : model.parameters())
    if (holds(p)) held_list_.push_back(p);
}

Pipeline::~Pipeline() = default;

void Pipeline::close() {
  if (own_dp_) own_dp_->close();
  if (own_pipe_) own_pipe_->close();
}

bool Pipeline::holds(const torch::Tensor& p) const { return held_.count(p.unsafeGetTensorImpl()) > 0; }
bool Pipeline::owns(const torch::Tensor& p) const { return owned_.count(p.unsafeGetTensorImpl()) > 0; }

void Pipeline::release_others() {
  torch::NoGradGuard ng;
  for (auto& p : model_.parameters())
    if (!holds(p)) p.set_data(torch::empty({0}, p.options()));
}

void Pipeline::connect(Communicator& world, const DistOptions& dist) {
  Partition pipes;
  Partition stage_groups(static_cast<size_t>(stages_));
  for (int d = 0; d < dp_size_; d++) {
    std::vector<int> g;
    for (int s = 0; s < stages_; s++) {
      g.push_back(d * stages_ + s);
      stage_groups[size_t(s)].push_back(d * stages_ + s);
    }
    pipes.push_back(g);
  }
  auto groups = make_pipe_groups(dist, device_, world, {pipes, stage_groups});
  own_pipe_ = std::move(groups[0]);
  own_dp_ = std::move(groups[1]);
  pipe_ = own_pipe_.get();
  dp_ = own_dp_.get();
  if (!pipe_ || pipe_->rank() != stage_)
    throw std::logic_error("pipeline: this rank's pipeline group does not match its stage");
}

void Pipeline::connect_mesh(PipeGroup* pipe, PipeGroup* data, TensorParallelModel* model,
                            const tp::Context& ctx) {
  if (!pipe || pipe->rank() != stage_ || pipe->size() != stages_)
    throw std::logic_error("pipeline: the mesh's pipeline group does not match this rank's stage");
  if ((data ? data->size() : 1) != dp_size_ || (data ? data->rank() : 0) != dp_rank_)
    throw std::logic_error("pipeline: the mesh's data group does not match this rank's replica");
  if (!model) throw std::logic_error("pipeline: connect_mesh without a tensor-parallel model");
  pipe_ = pipe;
  dp_ = data;
  tpm_ = model;
  tp_ctx_ = ctx;
}

json Pipeline::info() const {
  return {{"stages", stages_},           {"stage", stage_},     {"dp_rank", dp_rank_},
          {"dp_size", dp_size_},         {"schedule", schedule_}, {"balance", balance_},
          {"balance_by", balance_by_},   {"layer_ms", layer_ms_},
          {"first_layer", first_layer_}, {"last_layer", last_layer_},
          {"tied_parameters", tied_.size()}};
}

int Pipeline::mark() {
  if (next_mark_ >= timeline_cap_) throw std::logic_error("pipeline: more timeline marks than planned");
  timeline_->mark(next_mark_);
  return next_mark_++;
}

void Pipeline::p2p(std::vector<P2POp> ops) {
  const int a = mark();
  {
    // The profiler's name for the wait (cs_profile: category "pipeline wait").
    RECORD_USER_SCOPE("cs::pipeline_p2p");
    pipe_->exchange(ops);
  }
  stats_->p2p.emplace_back(a, mark());
  for (const auto& op : ops) stats_->p2p_bytes += nbytes(op.t);
}

// ---- point-to-point -----------------------------------------------------------
// The first activation between two stages is preceded by its shape and dtype
// (int64: ndim, dtype, sizes); later ones must match it. Both schedules make
// that first send and receive a plain send_forward / recv_forward.

void Pipeline::recv_forward(int i) {
  if (first()) return;
  if (!in_known_) {
    auto h = torch::empty({2 + kMaxDims}, torch::TensorOptions().dtype(torch::kLong).device(device_));
    p2p({{false, h, stage_ - 1, kHeaderTag}});
    auto c = h.cpu();
    auto v = c.accessor<int64_t, 1>();
    in_shape_.assign(size_t(v[0]), 0);
    for (int64_t d = 0; d < v[0]; d++) in_shape_[size_t(d)] = v[2 + d];
    in_dtype_ = torch::ScalarType(v[1]);
    in_known_ = true;
  }
  auto x = torch::empty(in_shape_, torch::TensorOptions().dtype(in_dtype_).device(device_));
  p2p({{false, x, stage_ - 1, act_tag(i)}});
  slots_[size_t(i)].input = x.requires_grad_(true);
}

void Pipeline::send_forward(int i) {
  if (last()) return;
  auto y = slots_[size_t(i)].output.detach().contiguous();
  if (!out_known_) {
    if (y.dim() > kMaxDims) throw std::logic_error("pipeline: activations of more than 8 dimensions");
    auto h = torch::zeros({2 + kMaxDims}, torch::kLong);
    h[0] = y.dim();
    h[1] = int64_t(y.scalar_type());
    for (int64_t d = 0; d < y.dim(); d++) h[2 + d] = y.size(d);
    p2p({{true, h.to(device_), stage_ + 1, kHeaderTag}});
    out_shape_ = y.sizes().vec();
    out_dtype_ = y.scalar_type();
    out_known_ = true;
  }
  if (y.sizes().vec() != out_shape_ || y.scalar_type() != out_dtype_)
    throw std::logic_error("pipeline: stage " + std::to_string(stage_) +
                           "'s output changed shape or dtype between micro-batches");
  p2p({{true, y, stage_ + 1, act_tag(i)}});
}

torch::Tensor Pipeline::send_forward_recv_backward(int send_i, int recv_i) {
  if (last()) return {};
  auto y = slots_[size_t(send_i)].output.detach().contiguous();
  auto g = torch::empty(out_shape_, torch::TensorOptions().dtype(out_dtype_).device(device_));
  p2p({{true, y, stage_ + 1, act_tag(send_i)}, {false, g, stage_ + 1, grad_tag(recv_i)}});
  return g;
}

void Pipeline::send_backward_recv_forward(int send_i, const torch::Tensor& dx, int recv_i) {
  if (first()) return;
  auto x = torch::empty(in_shape_, torch::TensorOptions().dtype(in_dtype_).device(device_));
  p2p({{true, dx.contiguous(), stage_ - 1, grad_tag(send_i)}, {false, x, stage_ - 1, act_tag(recv_i)}});
  slots_[size_t(recv_i)].input = x.requires_grad_(true);
}

torch::Tensor Pipeline::recv_backward(int i) {
  if (last()) return {};
  auto g = torch::empty(out_shape_, torch::TensorOptions().dtype(out_dtype_).device(device_));
  p2p({{false, g, stage_ + 1, grad_tag(i)}});
  return g;
}

void Pipeline::send_backward(int i, const torch::Tensor& dx) {
  if (first()) return;
  p2p({{true, dx.contiguous(), stage_ - 1, grad_tag(i)}});
}

// ---- compute ------------------------------------------------------------------

void Pipeline::forward(int i, const Batch& b) {
  Slot& s = slots_[size_t(i)];
  const int64_t before = device_.is_cuda() ? memory_stats(device_).allocated : 0;
  const int a = mark();
  torch::Tensor out, loss;
  {
    AutocastScope autocast(device_, precision_);
    out = model_.forward_layers(first_layer_, last_layer_, s.input, b);
    if (last()) loss = model_.loss(out, b);
  }
  stats_->fwd.emplace_back(a, mark());
  if (last()) {
    loss_sum_.add_(loss.detach());
    s.output = backward_scale_.defined() ? loss * backward_scale_ : loss / double(m_);
  } else {
    s.output = out;
  }
  // GPU: what the forward left allocated (the autograd graph's saved tensors
  // and the output). CPU has no allocator statistics: the stage's input and
  // output, which the schedule itself keeps until the backward.
  s.bytes = device_.is_cuda() ? memory_stats(device_).allocated - before : nbytes(s.input) + nbytes(out);
  stats_->live += s.bytes;
  stats_->act_peak = std::max(stats_->act_peak, stats_->live);
}

torch::Tensor Pipeline::backward(int i, const torch::Tensor& grad) {
  Slot& s = slots_[size_t(i)];
  const int a = mark();
  if (last())
    s.output.backward();
  else
    torch::autograd::backward({s.output}, {grad});
  stats_->bwd.emplace_back(a, mark());
  torch::Tensor dx;
  if (!first()) {
    dx = s.input.grad();
    if (!dx.defined()) throw std::logic_error("pipeline: stage input received no gradient");
  }
  stats_->live -= s.bytes;
  s = Slot();
  return dx;
}

// ---- schedules ----------------------------------------------------------------

static const Batch& batch_or_empty(const std::vector<Batch>& bs, int i) {
  static const Batch empty;
  return size_t(i) < bs.size() ? bs[size_t(i)] : empty;
}

// GPipe: every forward, then every backward (in micro-batch order).
void Pipeline::run_gpipe() {
  const int M = int(m_);
  for (int i = 0; i < M; i++) {
    recv_forward(i);
    forward(i, batch_or_empty(*batches_, i));
    send_forward(i);
  }
  for (int i = 0; i < M; i++) {
    auto g = recv_backward(i);
    send_backward(i, backward(i, g));
  }
}

// 1F1B: S - stage - 1 warm-up forwards, then one forward and one backward in
// turn, then the remaining backwards; at most S - stage micro-batches in flight.
void Pipeline::run_1f1b() {
  const int M = int(m_);
  const int warmup = std::min(stages_ - stage_ - 1, M), steady = M - warmup;
  for (int i = 0; i < warmup; i++) {
    recv_forward(i);
    forward(i, batch_or_empty(*batches_, i));
    send_forward(i);
  }
  if (steady > 0) recv_forward(warmup);
  for (int j = 0; j < steady; j++) {
    const int f = warmup + j;
    forward(f, batch_or_empty(*batches_, f));
    auto g = send_forward_recv_backward(f, j);
    auto dx = backward(j, g);
    if (j == steady - 1)
      send_backward(j, dx);
    else
      send_backward_recv_forward(j, dx, f + 1);
  }
  for (int j = steady; j < M; j++) {
    auto g = recv_backward(j);
    send_backward(j, backward(j, g));
  }
}

// ---- after the schedule -------------------------------------------------------

// Sequence parallelism: the LayerNorms, row-parallel biases and positions of
// the stage saw only this rank's sequence shard; their gradients are summed
// over the tensor group (as the trainer's reduce_and_clip_tp, before the data
// group's average). The tensor group's collectives are timed by its own timer
// (the trainer's tp_comm_ms), not among the pipeline's.
void Pipeline::reduce_sequence_parallel() {
  if (!tpm_) return;
  std::vector<torch::Tensor> held;
  for (const auto& p : tpm_->sequence_parallel_params())
    if (holds(p)) held.push_back(p);
  tp::allreduce_sequence_parallel_grads(held, tp_ctx_);
}

void Pipeline::reduce_data_parallel() {
  if (!dp_) return;
  std::vector<torch::Tensor> grads;
  for (const auto& p : held_list_)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return;
  int a = 0;
  stats_->coll_bytes += average_over_group(grads, *dp_, [&] { a = mark(); },
                                           [&] { stats_->coll.emplace_back(a, mark()); });
  stats_->collectives++;
}

// Megatron's embedding group: the owner's and the last stage's gradients of a
// tied weight are summed on both (a + b == b + a: both end bit-identical).
void Pipeline::sum_tied() {
  if (tied_.empty()) return;
  torch::NoGradGuard ng;
  std::vector<P2POp> ops;
  std::vector<torch::Tensor> mine, theirs;
  for (const auto& t : tied_) {
    auto& g = t.param.mutable_grad();
    if (!g.defined()) g = torch::zeros_like(t.param);
    mine.push_back(g.contiguous());
    theirs.push_back(torch::empty_like(mine.back()));
    ops.push_back({true, mine.back(), t.peer, t.tag});
    ops.push_back({false, theirs.back(), t.peer, t.tag});
  }
  const int a = mark();
  pipe_->exchange(ops);
  stats_->coll.emplace_back(a, mark());
  for (size_t k = 0; k < tied_.size(); k++) {
    tied_[k].param.mutable_grad().add_(theirs[k]);
    stats_->coll_bytes += 2 * nbytes(theirs[k]);
  }
  stats_->collectives++;
}

// Clipping over the whole model (clip_grads, optim.h): each stage's float64
// sum of squared gradient norms (tied weights counted on their owner) and its
// loss are summed over the pipeline group in one float64 all-reduce, so every
// stage clips by the coefficient a single rank computes. Tensor-parallel
// stages: the sharded parameters' sum first over the tensor group, plus the
// replicated ones' (equal on every tensor rank: counted once), as the
// trainer's reduce_and_clip_tp.
PipelineStep Pipeline::clip(const torch::Tensor& loss_scale, double max_norm) {
  torch::NoGradGuard ng;
  std::vector<torch::Tensor> all, counted, sharded;
  for (const auto& p : held_list_) {
    if (!p.grad().defined()) continue;
    all.push_back(p.grad());
    if (owns(p)) (tpm_ && tpm_->tensor_sharded(p) ? sharded : counted).push_back(p.grad());
  }
  const torch::Tensor sumsq =
      tpm_ ? tp::tensor_parallel_sumsq(grad_sumsq(sharded, device_), grad_sumsq(counted, device_), tp_ctx_.group)
           : grad_sumsq(counted, device_);
  auto v = torch::stack({sumsq, loss_sum_.to(torch::kFloat64)});
  const int a = mark();
  pipe_->all_reduce_sum(v);
  stats_->coll.emplace_back(a, mark());
  stats_->coll_bytes += nbytes(v);
  stats_->collectives++;
  torch::Tensor inv = loss_scale.defined() ? loss_scale.reciprocal() : torch::Tensor();
  const ClipResult c = clip_grads(all, v[0], inv, max_norm);
  PipelineStep r;
  r.norm = c.norm;
  r.found_inf = c.found_inf;
  r.loss = v[1].to(torch::kFloat32) / double(m_);
  return r;
}

PipelineStep Pipeline::step(const std::vector<Batch>& batches, const torch::Tensor& loss_scale,
                            double max_norm) {
  if (!pipe_) throw std::logic_error("pipeline: step before connect");
  m_ = int64_t(batches.size());
  batches_ = &batches;
  slots_.assign(size_t(m_), Slot());
  stats_ = std::make_unique<Stats>();
  const int cap = int(16 * m_ + 64);
  if (!timeline_ || cap != timeline_cap_) {
    timeline_ = make_timeline(device_, cap);
    timeline_cap_ = cap;
  }
  next_mark_ = 0;
  loss_sum_ = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat32).device(device_));
  backward_scale_ = loss_scale.defined() ? loss_scale / double(m_) : torch::Tensor();

  // The window is the pipeline's span, the same on every stage: from a common
  // start to the moment the last stage of the replica is done (one-float
  // all-reduces on the pipeline group on either side).
  auto sync = [&] { pipe_->all_reduce_sum(torch::zeros({1}, loss_sum_.options())); };
  sync();
  stats_->win_a = mark();
  if (schedule_ == "1f1b")
    run_1f1b();
  else
    run_gpipe();
  sync();
  stats_->win_b = mark();
  reduce_sequence_parallel();
  reduce_data_parallel();
  sum_tied();
  PipelineStep r = clip(loss_scale, max_norm);
  const int end = mark();
  timeline_->finish(end);
  batches_ = nullptr;

  Stats& s = *stats_;
  auto sum = [&](const std::vector<std::pair<int, int>>& v) {
    double t = 0;
    for (const auto& ab : v) t += timeline_->ms(ab.first, ab.second);
    return t;
  };
  s.fwd_ms = sum(s.fwd);
  s.bwd_ms = sum(s.bwd);
  s.p2p_ms = sum(s.p2p);
  s.coll_ms = sum(s.coll);
  s.window_ms = timeline_->ms(s.win_a, s.win_b);
  return r;
}

void Pipeline::add_metrics(json& m) const {
  if (!stats_) return;
  const Stats& s = *stats_;
  const double busy = s.fwd_ms + s.bwd_ms;
  const double idle = std::max(0.0, s.window_ms - busy);
  m["forward_ms"] = s.fwd_ms;
  m["backward_ms"] = s.bwd_ms;
  m["bubble_ms"] = idle;
  m["comm_ms"] = s.p2p_ms + s.coll_ms;
  m["exposed_comm_ms"] = s.coll_ms;  // p2p waits are counted in the bubble
  m["comm_bytes"] = s.p2p_bytes + s.coll_bytes;
  m["collectives"] = s.collectives;
  // Each replica's samples are counted once, on its last stage (the runner sums
  // samples over ranks); each stage does about 1/S of the model's FLOPs.
  if (!last()) {
    m["samples"] = 0;
    m["tokens"] = 0;
    m["samples_per_s"] = 0.0;
    m["tokens_per_s"] = 0.0;
  }
  m["tflops"] = m["tflops"].get<double>() / stages_;
  m["mfu"] = m["mfu"].get<double>() / stages_;
  m["stages"] = json::array({{{"stage", stage_},
                              {"busy_ms", busy},
                              {"idle_ms", idle},
                              {"bubble_fraction", s.window_ms > 0 ? idle / s.window_ms : 0.0},
                              {"theory_bubble", theory_bubble(stages_, m_)},
                              {"act_peak_bytes", s.act_peak},
                              {"p2p_bytes", s.p2p_bytes},
                              {"p2p_ms", s.p2p_ms}}});
}

}  // namespace cs
