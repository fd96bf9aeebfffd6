// shadow_gloo.cpp: CASESTUDY_INTERFERE=gloo:N, the stretch calibration of CPU
// ranks (interfere.h, docs/predict.md "The backward stretched by its own
// collectives"). A world of one whose DDP reducer, every other step, issues
// its own buckets as real Gloo all-reduces on a group of N ranks: this rank is
// rank 0, and ranks 1..N-1 are helpers in this process, each with its own
// ProcessGroupGloo and its own communication thread (a HostQueue, as a rank's
// GlooCommunicator has), contributing zeros. So this rank's CPU pays what a
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

#include "dist.h"
#include "model.h"

#ifdef CS_WITH_GLOO
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "gloo_store.h"  // gloo_issue

#include <atomic>
#include <chrono>
#include <exception>
#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "host_queue.h"
#endif

namespace cs {

#ifdef CS_WITH_GLOO
namespace {

constexpr int kTimeoutMS = 120000;  // a shadow collective not done by then is an error

// The dtype a tensor travels as on Gloo (no bfloat16: fp32, as comm_gloo.cpp).
torch::ScalarType wire_type(const torch::Tensor& t) {
  return t.scalar_type() == torch::kBFloat16 ? torch::kFloat : t.scalar_type();
}

// The N-rank group and its helpers.
class ShadowGroup {
 public:
  explicit ShadowGroup(int ranks) : ranks_(ranks) {
    auto store = c10::make_intrusive<c10d::HashStore>();
    pgs_.resize(size_t(ranks));
    std::vector<std::thread> joins;
    std::vector<std::exception_ptr> errors(static_cast<size_t>(ranks));
    // Every rank's constructor meshes with the others: all at once.
    for (int r = 0; r < ranks; r++) {
      joins.emplace_back([&, r] {
        try {
          auto opts = c10d::ProcessGroupGloo::Options::create(std::chrono::milliseconds(kTimeoutMS));
          opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
          opts->threads = 1;
          pgs_[size_t(r)] = c10::make_intrusive<c10d::ProcessGroupGloo>(store, r, ranks, opts);
        } catch (...) {
          errors[size_t(r)] = std::current_exception();
        }
      });
    }
    for (auto& t : joins) t.join();
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
    for (int r = 0; r < ranks; r++) {
      queues_.push_back(std::make_unique<HostQueue>("gloo shadow rank " + std::to_string(r), kTimeoutMS + 10000));
      zeros_.emplace_back();
    }
  }
  ~ShadowGroup() {
    // The queues (their threads) before the groups they use: rank 0's first,
    // then the helpers', whose last collectives rank 0's completed.
    queues_.clear();
  }

  // t summed over the group (rank 0 gives t, every helper zeros), issued in
  // order on every rank's thread.
  std::shared_ptr<CommWork> all_reduce(torch::Tensor t) {
    const auto type = wire_type(t);
    for (int r = 1; r < ranks_; r++) {
      torch::Tensor z = zeros(r, t.numel(), type);
      auto pg = pgs_[size_t(r)];
      queues_[size_t(r)]->submit([pg, z] {
        z.zero_();  // the last sum is still in it
        std::vector<torch::Tensor> v{z};
        gloo_issue([&] { return pg->allreduce(v); })->wait();
      });
    }
    auto pg = pgs_[0];
    return queues_[0]->submit([pg, t, type] {
      torch::Tensor w = t.scalar_type() == type && t.is_contiguous()
                            ? t
                            : t.to(type, false, false, torch::MemoryFormat::Contiguous);
      std::vector<torch::Tensor> v{w};
      gloo_issue([&] { return pg->allreduce(v); })->wait();
      if (!w.is_same(t)) {
        torch::NoGradGuard ng;
        t.copy_(w);
      }
    });
  }

  // in gathered over the group; out (the world of one's: in's size) gets
  // rank 0's block, its own.
  std::shared_ptr<CommWork> all_gather(torch::Tensor in, torch::Tensor out) {
    for (int r = 1; r < ranks_; r++) {
      torch::Tensor z = zeros(r, in.numel(), in.scalar_type());
      torch::Tensor g = torch::empty({in.numel() * ranks_}, in.options());
      auto pg = pgs_[size_t(r)];
      const int n = ranks_;
      queues_[size_t(r)]->submit([pg, z, g, n] {
        std::vector<std::vector<torch::Tensor>> outs(1);
        for (int k = 0; k < n; k++) outs[0].push_back(g.narrow(0, k * z.numel(), z.numel()));
        std::vector<torch::Tensor> ins{z};
        gloo_issue([&] { return pg->allgather(outs, ins); })->wait();
      });
    }
    auto pg = pgs_[0];
    const int n = ranks_;
    return queues_[0]->submit([pg, in, out, n] {
      torch::Tensor flat = in.reshape({-1}).contiguous();
      torch::Tensor g = torch::empty({flat.numel() * n}, flat.options());
      std::vector<std::vector<torch::Tensor>> outs(1);
      for (int k = 0; k < n; k++) outs[0].push_back(g.narrow(0, k * flat.numel(), flat.numel()));
      std::vector<torch::Tensor> ins{flat};
      gloo_issue([&] { return pg->allgather(outs, ins); })->wait();
      torch::NoGradGuard ng;
      out.view({-1}).copy_(g.narrow(0, 0, flat.numel()));
    });
  }

 private:
  // Helper r's buffer of n elements of type (one per size: its queue runs one
  // collective at a time).
  torch::Tensor zeros(int r, int64_t n, torch::ScalarType type) {
    auto& m = zeros_[size_t(r)];
    auto key = std::make_pair(n, int(type));
    auto it = m.find(key);
    if (it == m.end()) it = m.emplace(key, torch::zeros({n}, torch::TensorOptions().dtype(type))).first;
    return it->second;
  }

  const int ranks_;
  std::vector<c10::intrusive_ptr<c10d::ProcessGroupGloo>> pgs_;
  std::vector<std::map<std::pair<int64_t, int>, torch::Tensor>> zeros_;  // per helper
  std::vector<std::unique_ptr<HostQueue>> queues_;                     // last: joined before pgs_
};

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

std::unique_ptr<Interference> make_shadow_interference(int ranks) {
  if (ranks < 2) throw ConfigError("CASESTUDY_INTERFERE=gloo:" + std::to_string(ranks) + ": give 2 or more ranks");
#ifdef CS_WITH_GLOO
  return std::make_unique<ShadowInterference>(ranks);
#else
  throw UnsupportedError("CASESTUDY_INTERFERE=gloo: this engine was built without Gloo");
#endif
}

}  // namespace cs
