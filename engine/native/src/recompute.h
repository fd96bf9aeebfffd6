// recompute.h: whether this thread is re-running a checkpointed block's
// forward in the backward pass (checkpoint.cpp). That forward already ran once
// in the step; module state it changes as a side effect (BatchNorm's running
// statistics and num_batches_tracked, bn_relu.cpp) must change only once, as
// without checkpointing.
#pragma once

namespace cs {

// True while a checkpointed block is being recomputed on this thread.
bool recomputing();

// Marks the recomputation: recomputing() is true on this thread while it lives.
class RecomputeScope {
 public:
  RecomputeScope();
  ~RecomputeScope();
  RecomputeScope(const RecomputeScope&) = delete;
  RecomputeScope& operator=(const RecomputeScope&) = delete;

 private:
  bool outer_;
};

}  // namespace cs
