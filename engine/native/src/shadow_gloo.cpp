// shadow_gloo.cpp: CASESTUDY_INTERFERE=gloo:N, the stretch calibration of CPU
// ranks (interfere.h, docs/predict.md "The backward stretched by its own
// collectives"). A world of one whose DDP reducer, every other step, issues
// its own buckets as real Gloo all-reduces on a group of N ranks: this rank is
// rank 0, and ranks 1..N-1 are helpers in this process (shadow_group.h), each
// with its own Gloo group and its own communication thread (a HostQueue, as a
// rank's GlooCommunicator has), contributing zeros. So this rank's CPU pays what a
// rank of the N-rank run pays for its collectives (Gloo's thread sending,
// receiving and reducing its share of every bucket, beside the backward),
// while the helpers compute nothing: no skew, no other rank's backward. The
// gradients are unchanged (x + 0 + ... + 0 = x) and the reducer still divides
// by its world of one. The other steps issue the buckets on the world of one
// as usual; the backward of the loaded steps over that of the clean steps of
// the same launch is the trial's own stretch (predict/runs: Stretches). A
// calibration, never a measurement of the trial on N ranks.
#include "interfere.h"

#include <stdexcept>
#include <string>

#include "config.h"
#include "dist.h"
#include "model.h"

#ifdef CS_WITH_GLOO
#include <atomic>

#include "shadow_group.h"
#endif

namespace cs {

#ifdef CS_WITH_GLOO
namespace {

// The reducer's communicator: the world of one's, except that in a loaded
// step its all-reduces and all-gathers go to the shadow group.
class ShadowComm : public Communicator {
 public:
  ShadowComm(Communicator& base, ShadowGroup& group, const std::atomic<bool>& loaded, std::atomic<int64_t>& bytes)
      : base_(base), group_(group), loaded_(loaded), bytes_(bytes) {}
  int rank() const override { return base_.rank(); }
  int world_size() const override { return base_.world_size(); }
  std::string backend() const override { return base_.backend(); }
  std::string version() const override { return base_.version(); }
  int64_t wire_bytes(const torch::Tensor& t) const override { return base_.wire_bytes(t); }
  std::shared_ptr<CommWork> all_reduce_sum(torch::Tensor t) override {
    if (!loaded_) return base_.all_reduce_sum(t);
    check(t);
    bytes_ += base_.wire_bytes(t);
    return group_.all_reduce(t);
  }
  std::shared_ptr<CommWork> all_gather(torch::Tensor in, torch::Tensor out) override {
    if (!loaded_) return base_.all_gather(in, out);
    check(in);
    if (in.scalar_type() == torch::kBFloat16) throw CommError("gloo all_gather: bf16 is not supported by Gloo");
    bytes_ += base_.wire_bytes(in);
    return group_.all_gather(in, out);
  }
  void broadcast(torch::Tensor t, int root) override { base_.broadcast(t, root); }
  void send(torch::Tensor t, int peer) override { base_.send(t, peer); }
  void recv(torch::Tensor t, int peer) override { base_.recv(t, peer); }
  void barrier() override { base_.barrier(); }

 private:
  static void check(const torch::Tensor& t) {
    if (!t.device().is_cpu()) throw CommError("CASESTUDY_INTERFERE=gloo: needs CPU tensors");
  }
  Communicator& base_;
  ShadowGroup& group_;
  const std::atomic<bool>& loaded_;
  std::atomic<int64_t>& bytes_;
};

class ShadowInterference : public Interference {
 public:
  explicit ShadowInterference(int ranks) : ranks_(ranks), group_(ranks) {}
  ~ShadowInterference() override = default;
  void begin() override {}
  void end() override {}
  Communicator& reducer_comm(Communicator& base) override {
    // A rank of a real group would send its buckets to its own group of
    // helpers, not its peers: the ranks would drift apart.
    if (base.world_size() != 1)
      throw ConfigError("CASESTUDY_INTERFERE=gloo:" + std::to_string(ranks_) + ": a world of one only (this rank is one of " +
                        std::to_string(base.world_size()) + "); unset it for a multi-rank run");
    comm_ = std::make_unique<ShadowComm>(base, group_, loaded_, bytes_);
    return *comm_;
  }
  // The step just reported: its shadow traffic (0 in a clean step), and the
  // next step the other kind.
  double take_gbps(double ms, int) override {
    if (!comm_)
      throw UnsupportedError("CASESTUDY_INTERFERE=gloo: needs the DDP reducer (a world of one with dist.backend gloo; "
                             "no ZeRO, tensor parallelism or pipeline)");
    const double b = double(bytes_.exchange(0));
    loaded_ = !loaded_;
    return ms > 0 ? b / (ms * 1e6) : 0.0;
  }
  int shadow_ranks() const override { return ranks_; }

 private:
  const int ranks_;
  ShadowGroup group_;
  std::atomic<bool> loaded_{false};  // step 0 clean, then every other step loaded
  std::atomic<int64_t> bytes_{0};
  std::unique_ptr<ShadowComm> comm_;  // destroyed first: it refers to group_
};

}  // namespace
#endif

void check_shadow_config(const EngineConfig& cfg, int ranks) {
  std::string why;
  if (cfg.dist.world_size > 1)  // tensor parallelism included: its degree divides the world
    why = "dist.world_size is " + std::to_string(cfg.dist.world_size) +
          " (a rank of a real group would send its buckets to its own helpers, not its peers)";
  else if (cfg.dist.backend.empty())
    why = "dist.backend is not set (a world of one without it has no reducer)";
  else if (cfg.zero.stage > 0)
    why = "zero.stage is " + std::to_string(cfg.zero.stage) + " (ZeRO replaces the reducer)";
  if (why.empty()) return;
  throw ConfigError("CASESTUDY_INTERFERE=gloo:" + std::to_string(ranks) +
                    " (the stretch calibration) needs the DDP reducer of a world of one (dist.world_size 1, "
                    "dist.backend gloo, zero.stage 0), but " + why +
                    ": unset CASESTUDY_INTERFERE or change the trial");
}

std::unique_ptr<Interference> make_shadow_interference(int ranks) {
  if (ranks < 2) throw ConfigError("CASESTUDY_INTERFERE=gloo:" + std::to_string(ranks) + ": give 2 or more ranks");
#ifdef CS_WITH_GLOO
  return std::make_unique<ShadowInterference>(ranks);
#else
  throw UnsupportedError("CASESTUDY_INTERFERE=gloo: this engine was built without Gloo");
#endif
}

}  // namespace cs
