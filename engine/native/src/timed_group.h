// timed_group.h: a PipeGroup that times its collectives, for tensor
// parallelism's step metrics (docs/tensor-parallel.md). A tensor group's
// collectives are synchronous on the compute stream (pipeline_group.h): nothing
// overlaps them, so all their time is exposed.
//
// Each collective inside an open step gets a pair of marks on the device's
// timeline (device.h: CUDA events recorded on the current stream on GPUs, the
// host clock on CPUs) around the wrapped group's call. The marks are a pool
// reused step after step and grown in chunks as needed; nothing waits on them
// per collective: stats() reads them once, after the caller waited for the
// step's work (the trainer's timeline finish). Collectives outside a step (the
// checksum's gathers) run untimed. Not for CUDA graph capture (an event
// recorded in a capture is not timed): the trainer refuses graphs with tp.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "device.h"
#include "pipeline_group.h"

namespace cs {

// One step's collectives on a group: their time (the sum over the collectives
// of the span between each one's two marks), how many, and their bytes: an
// all-reduce's tensor, an all-gather's gathered output, a reduce-scatter's
// whole input (nccl-tests' sizes), an exchange's sends and receives.
struct GroupCommStats {
  double ms = 0;
  int64_t collectives = 0;
  int64_t bytes = 0;
  std::vector<double> each_ms;  // per collective, in issue order
};

class TimedGroup : public PipeGroup {
 public:
  TimedGroup(std::unique_ptr<PipeGroup> inner, torch::Device device);

  // Opens a step (the previous step's marks are reused) and closes it.
  void begin_step();
  void end_step();
  // Collectives timed so far in this step (the trainer notes it at its own
  // marks, to tell which phase of the step each collective ran in).
  int64_t count() const { return collectives_; }
  // The last step's totals. Waits for its last mark (already done when the
  // caller waited for the step), then reads every pair once.
  GroupCommStats stats();

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  void exchange(const std::vector<P2POp>& ops) override;
  void all_reduce_sum(torch::Tensor t) override;
  void all_gather(const torch::Tensor& in, torch::Tensor out) override;
  void reduce_scatter_sum(const torch::Tensor& in, torch::Tensor out) override;
  void close() override { inner_->close(); }
  // The wrapped group, untimed (ZeRO's overlapped all-gathers run on it from
  // another thread: zero.h).
  PipeGroup& inner() { return *inner_; }

 private:
  static constexpr int kChunk = 64;  // marks per timeline (even: a pair never straddles two)
  int next_mark();
  template <class F>
  void timed(int64_t bytes, F&& call);

  std::unique_ptr<PipeGroup> inner_;
  torch::Device device_;
  std::vector<std::unique_ptr<Timeline>> chunks_;
  bool open_ = false;
  int marks_ = 0;  // used this step
  int64_t collectives_ = 0, bytes_ = 0;
};

// Replaces g (when set) by a TimedGroup around it; returns the wrapper (nullptr
// when g is).
TimedGroup* time_group(std::unique_ptr<PipeGroup>& g, torch::Device device);

}  // namespace cs
