// interfere.h: the κ calibration of the multi-GPU prediction (issue 40,
// docs/predict.md). With CASESTUDY_INTERFERE=C[:B] in its environment, a
// trainer runs a load beside every backward pass, as a concurrent collective
// would: on a GPU a copy kernel on a side stream with C blocks (C
// multiprocessors) streaming B GB/s (0 or none: as fast as C blocks go),
// started when the backward starts on the GPU and stopped when it ends (from
// the fourth backward pass: the first three load the step's kernels); on
// CPU ranks C threads streaming memory at B GB/s in all. The step's
// backward_ms with the load over that without is κ. Each step reports the
// traffic reached (interfere_gbps).
//
// CASESTUDY_INTERFERE=gloo:N (CPU ranks, a world of one with the DDP reducer;
// shadow_gloo.cpp) is the stretch calibration instead: every other step the
// reducer issues its own buckets as Gloo all-reduces on a group of N ranks
// whose other members are helper threads contributing zeros, so that the
// backward pays what a rank of the N-rank run pays for its collectives; the
// loaded steps report their traffic, the clean ones 0, and every step the
// group's ranks (interfere_ranks).
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>

namespace cs {

class Communicator;
struct EngineConfig;

class Interference {
 public:
  // The load CASESTUDY_INTERFERE asks for on device; null when it is unset.
  // Throws on a malformed value or a device it cannot load. gloo:N calls
  // check_shadow(N) first, before its Gloo group of N is set up (a refused
  // configuration fails on its field, not on that group's setup).
  static std::unique_ptr<Interference> from_env(torch::Device device,
                                                const std::function<void(int)>& check_shadow = {});
  virtual ~Interference() = default;
  virtual void begin() = 0;  // at the backward pass's start (in stream order on a GPU)
  virtual void end() = 0;    // at its end
  // GB/s read + written during the oldest n backward passes not taken yet
  // (a step's grad_accum passes), over their ms milliseconds.
  virtual double take_gbps(double ms, int n) = 0;
  // Blocks of the load's kernel that outlived their backward pass and stopped
  // at their deadline (2 s), so far, as of the last take_gbps: something in the
  // backward waited for the whole device, and the calibration is void. Host
  // threads never do.
  virtual int64_t timeouts() { return 0; }
  // The communicator the DDP reducer issues its buckets on (gloo:N: one that
  // sends them to the N-rank group in loaded steps); base otherwise.
  virtual Communicator& reducer_comm(Communicator& base) { return base; }
  // gloo:N: N; 0 for the memory-streaming load.
  virtual int shadow_ranks() const { return 0; }
};

// CASESTUDY_INTERFERE=gloo:N (shadow_gloo.cpp).
std::unique_ptr<Interference> make_shadow_interference(int ranks);
// gloo:N sends the DDP reducer's buckets of a world of one to its group of N:
// a ConfigError naming the field unless cfg trains with that reducer
// (dist.world_size 1 with dist.backend set, zero.stage 0).
void check_shadow_config(const EngineConfig& cfg, int ranks);

}  // namespace cs
