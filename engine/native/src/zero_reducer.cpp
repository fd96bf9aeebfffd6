// zero_reducer.cpp: ZeRO-2's gradient reducer (zero.h, zero_layout.h).
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <mutex>

#include "device.h"
#include "model.h"
#include "ready_hook.h"
#include "zero_layout.h"

namespace cs {

namespace {

// ZeRO-2's reducer: in every micro-batch's backward, as a bucket's last
// gradient is accumulated, its gradients are copied into a padded bucket buffer
// and freed, and the buffer is reduce-scattered into the rank's block
// (shard[b]). In a later micro-batch of the step (grad_accum > 1) the rank
// first adds the shard (the sum so far) into its own block of the buffer, so
// the reduce-scatter leaves the running sum in the shard: no output beside it,
// and between micro-batches a rank holds its shard, not the gradients
// (as DeepSpeed's stage 2, which also reduces every micro-batch and keeps
// only the rank's partition of the gradients).
// end_micro_batch() (the trainer, after each backward but the last) and
// finalize() (after the last) launch what the hooks did not (every bucket
// without ddp.overlap) and wait; finalize() then averages.
//
// Summation order: the shard sums every rank's every micro-batch, in another
// order than DDP (each rank's micro-batches first, in .grad(), then the
// ranks), so with grad_accum > 1 stage 2 is within float32 rounding of DDP,
// not bitwise (docs/zero.md derives the bound).
//
// The reducer keeps no reference to a bucket buffer once its reduce-scatter is
// launched: the communicator holds it only as long as the collective reads it
// (dist.h reduce_scatter_sum), so the full gradient never exists at once, only
// the buckets in flight. Weak references to the launched buffers measure that
// (ReducerStats::held_peak_bytes): at each new buffer, the bytes of it and of
// the launched buffers something still holds; the most of a step is its peak,
// since the held bytes grow only when a buffer is made.
class ScatterReducer : public GradReducer {
 public:
  ScatterReducer(std::shared_ptr<ZeroLayout> L, std::vector<torch::Tensor> shard,
                 Communicator& comm, const DDPOptions& o)
      : L_(std::move(L)), shard_(std::move(shard)), comm_(comm), overlap_(o.overlap),
        pending_(L_->buckets.size(), 0), work_(L_->buckets.size()) {
    if (!overlap_) return;
    for (size_t i = 0; i < L_->params.size(); ++i) {
      auto acc = torch::autograd::impl::grad_accumulator(L_->params[i]);
      if (!acc) throw std::runtime_error("zero: a parameter is not a leaf (no gradient accumulator)");
      uintptr_t key = acc->add_post_hook(std::make_unique<ReadyHook>([this, i] { on_ready(i); }));
      hooks_.emplace_back(acc, key);
    }
  }
  ~ScatterReducer() override {
    for (auto& h : hooks_) h.first->del_post_hook(h.second);
  }

  // Every micro-batch communicates; last says it is the step's last.
  void prepare(bool last) override {
    std::lock_guard<std::mutex> lk(mu_);
    if (active_) throw std::logic_error("zero: prepare() before the previous micro-batch was ended");
    if (!open_) {  // the step's first micro-batch
      open_ = true;
      micro_ = 0;
      held_peak_ = 0;
      all_.clear();
    } else {
      micro_++;
    }
    last_ = last;
    active_ = true;
    for (size_t b = 0; b < L_->buckets.size(); b++) {
      pending_[b] = int(L_->buckets[b].params.size());
      work_[b].reset();
    }
    next_ = 0;
  }

  bool reduces_each_micro_batch() const override { return true; }

  void end_micro_batch() override {
    std::lock_guard<std::mutex> lk(mu_);
    if (!active_ || last_) throw std::logic_error("zero: end_micro_batch() outside an earlier micro-batch");
    settle();
  }

  void finalize() override {
    std::lock_guard<std::mutex> lk(mu_);
    if (!active_ || !last_) throw std::logic_error("zero: finalize() without prepare(true)");
    settle();
    torch::NoGradGuard ng;
    for (auto& s : shard_) s.div_(double(L_->world));
    open_ = false;
    valid_ = false;
  }

  // The stall fault drives the DDP reducer's watchdog path; ZeRO-2's reducer
  // refuses it rather than ignoring it.
  void stall_before(int, int) override {
    throw ConfigError("fault.kind stall is not supported with zero.stage 2 (use zero.stage 0 or 1)");
  }
  // No top-k under ZeRO-2: nothing is kept across steps, so the loss scale and
  // found_inf need no handling here.
  void set_loss_scale(const torch::Tensor&) override {}
  void end_step(const torch::Tensor&) override {}

  std::vector<c10::Storage> held_storage() const override {
    std::lock_guard<std::mutex> lk(mu_);
    std::vector<c10::Storage> out;
    for (const auto& s : shard_) out.push_back(s.storage());
    for (const auto& h : held_) {
      auto alive = h.buffer.lock();
      if (alive) out.emplace_back(std::move(alive));
    }
    return out;
  }

  // Every micro-batch's reduce-scatters; the exposed time is the waits at the
  // end of each backward (end_micro_batch, finalize).
  ReducerStats stats() const override {
    std::lock_guard<std::mutex> lk(mu_);
    if (valid_) return stats_;
    ReducerStats s;
    for (const auto& [b, w] : all_) {
      BucketStat bs;
      bs.op = "reduce_scatter";
      bs.bytes = L_->buckets[b].padded * 4;
      bs.ms = w->elapsed_ms();
      s.comm_ms += bs.ms;
      s.comm_bytes += bs.bytes;
      s.collectives++;
      s.buckets.push_back(bs);
    }
    if (s.collectives > 0) {
      for (size_t k = 0; k <= micro_ && k < clocks_.size(); k++) {
        clocks_[k]->finish(1);
        s.exposed_comm_ms += clocks_[k]->ms(0, 1);
      }
      s.held_peak_bytes = held_peak_;
    }
    stats_ = s;
    valid_ = true;
    return s;
  }

 private:
  void on_ready(size_t i) {
    std::lock_guard<std::mutex> lk(mu_);
    if (!active_) return;
    size_t b = L_->bucket_of[i];
    if (pending_[b] > 0) pending_[b]--;
    torch::NoGradGuard ng;
    while (next_ < L_->buckets.size() && pending_[next_] == 0) launch(next_++);
  }

  // The end of a micro-batch's backward: the buckets not launched yet, then
  // the wait for every bucket (timed: the exposed part).
  void settle() {
    torch::NoGradGuard ng;
    while (clocks_.size() <= micro_) clocks_.push_back(make_timeline(L_->flat.device(), 2));
    Timeline& clock = *clocks_[micro_];
    clock.mark(0);
    while (next_ < L_->buckets.size()) launch(next_++);
    for (size_t b = 0; b < L_->buckets.size(); b++) work_[b]->wait();
    clock.mark(1);
    active_ = false;
  }

  void launch(size_t bi) {
    const auto& b = L_->buckets[bi];
    torch::Tensor flat = torch::zeros({b.padded}, L_->flat.options());
    const int64_t bytes = b.padded * int64_t(flat.element_size());
    hold(flat, bytes);
    for (size_t i : b.params) {
      torch::Tensor& g = L_->params[i].mutable_grad();
      if (!g.defined()) continue;  // unused this micro-batch: zero
      view_as_in(flat, L_->at[i] - b.offset, L_->params[i]).copy_(g);
      g = torch::Tensor();  // only the rank's block survives the micro-batch
    }
    // A later micro-batch: the sum so far into this rank's block (the previous
    // micro-batch's reduce-scatter was waited for at its settle), so the
    // reduce-scatter leaves the new sum in the shard.
    if (micro_ > 0) flat.narrow(0, L_->block_begin(b) - b.offset, b.block).add_(shard_[bi]);
    work_[bi] = comm_.reduce_scatter_sum(flat, shard_[bi]);
    all_.emplace_back(bi, work_[bi]);
    // flat goes out of scope here: from now on only the collective holds it.
  }

  // A new bucket buffer: the launched ones still held (by their collectives)
  // and it, against the step's peak; then it is watched as they are.
  void hold(const torch::Tensor& flat, int64_t bytes) {
    int64_t now = bytes;
    size_t kept = 0;
    for (size_t k = 0; k < held_.size(); k++) {
      if (held_[k].buffer.expired()) continue;
      now += held_[k].bytes;
      if (k != kept) held_[kept] = std::move(held_[k]);
      kept++;
    }
    held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(kept), held_.end());
    held_peak_ = std::max(held_peak_, now);
    held_.push_back({flat.storage().getWeakStorageImpl(), bytes});
  }

  std::shared_ptr<ZeroLayout> L_;
  std::vector<torch::Tensor> shard_;
  Communicator& comm_;
  bool overlap_;
  std::vector<int> pending_;
  std::vector<std::shared_ptr<CommWork>> work_;  // this micro-batch's, per bucket
  std::vector<std::pair<size_t, std::shared_ptr<CommWork>>> all_;  // the step's: bucket, work
  struct Held {
    c10::weak_intrusive_ptr<c10::StorageImpl> buffer;
    int64_t bytes;
  };
  std::vector<Held> held_;  // the launched bucket buffers, weakly
  int64_t held_peak_ = 0;   // this step's most bucket-buffer bytes held at once
  std::vector<std::pair<std::shared_ptr<torch::autograd::Node>, uintptr_t>> hooks_;
  mutable std::mutex mu_;
  bool open_ = false;    // a step has begun (its first prepare) and not been finalized
  bool active_ = false;  // in a micro-batch's backward: between prepare and its settle
  bool last_ = false;    // the micro-batch is the step's last
  size_t micro_ = 0;     // the micro-batch's index in the step
  size_t next_ = 0;
  std::vector<std::unique_ptr<Timeline>> clocks_;  // per micro-batch: marks 0, 1 around its settle
  mutable ReducerStats stats_;
  mutable bool valid_ = false;
};

}  // namespace

std::unique_ptr<GradReducer> make_scatter_reducer(std::shared_ptr<ZeroLayout> L, std::vector<torch::Tensor> shard,
                                                  Communicator& comm, const DDPOptions& o) {
  return std::make_unique<ScatterReducer>(std::move(L), std::move(shard), comm, o);
}

}  // namespace cs
