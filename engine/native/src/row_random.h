// row_random.h: counter-based random numbers for the synthetic data, keyed by
// (seed, stream, step, global row, element). Every value is a pure function
// of its key, computed in batched integer tensor ops on the batch's device
// (no generator state, no per-row host loop), so a data-parallel rank
// generates only its own rows of the global batch and they equal, bit for
// bit, the same rows of a one-rank run of the global batch (the same on the
// CPU and on a GPU for the integer draws; floats may differ in the last ulp
// of log/cos between devices). On a GPU with the engine's kernels each draw
// is one kernel (kernels.h "rand") with the tensor ops' values.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "cuda/dtype.h"

namespace cs {

class RowRandom {
 public:
  // rows [row0, row0 + rows) of every step's global batch.
  RowRandom(uint64_t seed, int64_t row0, int64_t rows, torch::Device device);

  // The next step's draws (DataSource::next calls it once per batch).
  void next_step() { ++step_; }
  int64_t step() const { return step_; }

  // [rows, per_row] draws of stream `stream` at the current step:
  // 32 random bits as int64 in [0, 2^32); float32 uniform in [0, 1) (24
  // bits); int64 uniform in [lo, hi) (hi - lo <= 2^31, modulo bias below
  // (hi - lo) / 2^32); float32 standard normal (Box-Muller).
  torch::Tensor bits(uint32_t stream, int64_t per_row) const;
  torch::Tensor uniform(uint32_t stream, int64_t per_row) const;
  torch::Tensor randint(uint32_t stream, int64_t per_row, int64_t lo, int64_t hi) const;
  torch::Tensor normal(uint32_t stream, int64_t per_row) const;

 private:
  uint32_t key(uint32_t stream) const;             // of (seed, stream, step)
  torch::Tensor row_keys(uint32_t stream) const;  // [rows, 1] int64
  // The draw through the "rand" kernel, or an undefined tensor where it does
  // not run (then the tensor ops draw).
  torch::Tensor kernel(kern::RowKind kind, uint32_t stream, int64_t per_row, int64_t lo, int64_t span) const;
  uint64_t seed_;
  int64_t row0_, rows_;
  torch::Device device_;
  int64_t step_ = 0;
};

// The synthetic data's generator version, reported in cs_info as
// data_version: 2 is per-row keyed (RowRandom); 1 (absent) drew each rank's
// batch from one generator stream and sliced the global batch.
constexpr int kDataVersion = 2;

}  // namespace cs
