// zero_test.cpp: ZeRO-2 keeps only the rank's shard of the gradients
// (src/zero.cpp's ScatterReducer, issue 39). A bucket's full buffer must be
// gone once its reduce-scatter no longer reads it, so the buckets of a
// backward are never all alive at once:
//   - the reducer, with a communicator whose reduce-scatter is done when it
//     returns: the communicator watches the inputs it was handed (weak
//     references) and finds none of the earlier ones alive at a later call,
//     and the reducer's own count (ReducerStats::held_peak_bytes) is one
//     bucket, the largest, not the model; with a communicator that holds its
//     inputs until wait() (as the default reduce-scatter and, before issue
//     39's fix, the reducer itself did) both counts say every bucket;
//   - grad_accum 3 (with and without ddp.overlap): every micro-batch's
//     backward reduce-scatters every bucket, no .grad() survives a
//     micro-batch, the reducer holds only the shard between micro-batches
//     (held_storage), and the shard ends as the average of every micro-batch's
//     sum;
//   - the Gloo and host-staged (CPU tensors) communicators on 2 thread ranks:
//     the staged one holds no reference to the input once reduce_scatter_sum
//     returns, Gloo none once the work is done (before wait() is called; c10d's
//     worker lets go of its tensors just after, so within 5 s), and both leave
//     block rank of the sum in out.
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <thread>

#include "dist.h"
#include "native_test.h"
#include "zero.h"

#ifdef CS_WITH_GLOO
#include "gloo_world.h"
#endif

using namespace cs;

namespace {

class DoneWork : public CommWork {
 public:
  void wait() override {}
  double elapsed_ms() override { return 1; }
};

// Holds the input until wait(), as Communicator's default reduce-scatter does.
class HoldingWork : public CommWork {
 public:
  explicit HoldingWork(torch::Tensor in) : in_(std::move(in)) {}
  void wait() override { in_ = torch::Tensor(); }
  double elapsed_ms() override { return 1; }

 private:
  torch::Tensor in_;
};

// Rank 0 of a world of two whose other rank sends the same gradients: the
// reduce-scatter leaves twice this rank's block, so the average is the
// gradient itself (other = 1). With other = 0 the other rank sends zeros, so
// the block is this rank's own (what a later micro-batch adds to its block
// included). Each call counts the earlier inputs still alive.
class WatchingComm : public Communicator {
 public:
  explicit WatchingComm(bool hold, double other = 1) : hold_(hold), other_(other) {}
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  std::string backend() const override { return "test"; }
  std::string version() const override { return "test"; }
  std::shared_ptr<CommWork> all_reduce_sum(torch::Tensor) override { return std::make_shared<DoneWork>(); }
  std::shared_ptr<CommWork> all_gather(torch::Tensor in, torch::Tensor out) override {
    torch::NoGradGuard ng;
    out.narrow(0, 0, in.numel()).copy_(in);
    out.narrow(0, in.numel(), in.numel()).copy_(in);
    return std::make_shared<DoneWork>();
  }
  std::shared_ptr<CommWork> reduce_scatter_sum(torch::Tensor in, torch::Tensor out) override {
    int64_t alive = 0;
    for (auto& w : seen_) alive += w.expired() ? 0 : 1;
    most_alive_ = std::max(most_alive_, alive);
    seen_.push_back(in.storage().getWeakStorageImpl());
    outs_.push_back(out);
    {
      torch::NoGradGuard ng;
      out.copy_(in.narrow(0, 0, out.numel()) * (1 + other_));
    }
    if (hold_) return std::make_shared<HoldingWork>(in);
    return std::make_shared<DoneWork>();
  }
  void broadcast(torch::Tensor, int) override {}
  void send(torch::Tensor, int) override {}
  void recv(torch::Tensor, int) override {}
  void barrier() override {}

  int64_t calls() const { return int64_t(seen_.size()); }
  const std::vector<torch::Tensor>& outs() const { return outs_; }
  int64_t most_alive() const { return most_alive_; }  // earlier inputs alive at a call
  void reset() {
    seen_.clear();
    outs_.clear();
    most_alive_ = 0;
  }

 private:
  bool hold_;
  double other_;
  std::vector<c10::weak_intrusive_ptr<c10::StorageImpl>> seen_;
  std::vector<torch::Tensor> outs_;  // the shards
  int64_t most_alive_ = 0;
};

// 8 parameters of 4096 fp32 elements (16 KiB) and buckets of 16 KiB: 8
// buckets of one parameter, each rank's block 2048 elements. ZeRO-2 over comm.
struct EightBuckets {
  std::vector<torch::Tensor> params;
  std::unique_ptr<ZeroOptimizer> zero;
  std::unique_ptr<GradReducer> reducer;
  EightBuckets(uint64_t seed, Communicator& comm, bool overlap) {
    torch::manual_seed(seed);
    for (int i = 0; i < 8; i++) params.push_back(torch::randn({64, 64}).requires_grad_(true));
    ZeroOptions z;
    z.stage = 2;
    DDPOptions ddp;
    ddp.bucket_mb = ddp.first_bucket_mb = 16.0 / 1024;
    ddp.overlap = overlap;
    zero = std::make_unique<ZeroOptimizer>(params, std::vector<bool>(8, true), comm, z, ddp, OptimOptions{});
    reducer = zero->make_reducer();
  }
};

int reducer_case(bool hold) {
  WatchingComm comm(hold);
  EightBuckets m(3, comm, /*overlap=*/true);
  auto& params = m.params;
  auto& reducer = m.reducer;
  const int64_t bucket_bytes = 64 * 64 * 4;
  for (int step = 0; step < 2; step++) {
    comm.reset();
    reducer->prepare(true);
    torch::Tensor loss = torch::zeros({});
    for (size_t i = 0; i < params.size(); i++) loss = loss + (params[i] * params[i]).sum() * double(i + 1);
    loss.backward();
    reducer->finalize();
    const ReducerStats s = reducer->stats();
    CS_CHECK(comm.calls() == 8);
    CS_CHECK(s.collectives == 8);
    if (hold) {
      CS_CHECK(comm.most_alive() == 7);  // every earlier bucket, at the last one
      CS_CHECK(s.held_peak_bytes == 8 * bucket_bytes);
    } else {
      CS_CHECK(comm.most_alive() == 0);
      CS_CHECK(s.held_peak_bytes == bucket_bytes);
    }
    // Each bucket's shard (the reduce-scatter's out, averaged by finalize) is
    // the rank's block of the averaged gradient: the first 2048 elements of
    // its parameter's gradient, 2 (i + 1) p; bucket k holds parameter 7 - k.
    CS_CHECK(comm.outs().size() == params.size());
    for (size_t k = 0; k < params.size(); k++) {
      const size_t i = params.size() - 1 - k;
      torch::Tensor want = (params[i].detach() * 2 * double(i + 1)).reshape({-1}).narrow(0, 0, 2048);
      CS_CHECK(torch::equal(comm.outs()[k], want));
    }
    for (auto& p : params) CS_CHECK(!p.grad().defined());  // only the shard survives
  }
  return 0;
}

// grad_accum 3: micro-batch k's loss is (k + 1) sum_i (i + 1) |p_i|^2, so its
// gradient is 2 (k + 1) (i + 1) p_i and the three sum to 12 (i + 1) p_i; the
// other rank sends zeros, so the average over the world of two is half that.
int accum_case(bool overlap) {
  WatchingComm comm(false, /*other=*/0);
  EightBuckets m(5, comm, overlap);
  auto& params = m.params;
  auto& reducer = m.reducer;
  CS_CHECK(reducer->reduces_each_micro_batch());
  const int64_t bucket_bytes = 64 * 64 * 4, shard_bytes = 8 * bucket_bytes / 2;
  for (int step = 0; step < 2; step++) {
    comm.reset();
    for (int k = 0; k < 3; k++) {
      reducer->prepare(k == 2);
      torch::Tensor loss = torch::zeros({});
      for (size_t i = 0; i < params.size(); i++)
        loss = loss + (params[i] * params[i]).sum() * double((k + 1) * (i + 1));
      loss.backward();
      if (k == 2) break;
      // Without overlap the backward launched nothing: it all runs now.
      CS_CHECK(comm.calls() == (overlap ? 8 * (k + 1) : 8 * k));
      reducer->end_micro_batch();
      CS_CHECK(comm.calls() == 8 * (k + 1));
      for (auto& p : params) CS_CHECK(!p.grad().defined());
      int64_t held = 0;
      for (const auto& st : reducer->held_storage()) held += int64_t(st.nbytes());
      CS_CHECK(held == shard_bytes);  // the shard only: no bucket buffer, no other output
    }
    reducer->finalize();
    const ReducerStats s = reducer->stats();
    CS_CHECK(comm.calls() == 24);
    CS_CHECK(s.collectives == 24);
    CS_CHECK(s.held_peak_bytes == bucket_bytes);
    CS_CHECK(comm.most_alive() == 0);
    // The last micro-batch's outputs are the shards, bucket k parameter 7 - k.
    for (size_t k = 0; k < params.size(); k++) {
      const size_t i = params.size() - 1 - k;
      torch::Tensor want = (params[i].detach() * 6 * double(i + 1)).reshape({-1}).narrow(0, 0, 2048);
      const torch::Tensor& got = comm.outs()[16 + k];
      CS_CHECK(torch::allclose(got, want, 1e-6, 0));
    }
    for (auto& p : params) CS_CHECK(!p.grad().defined());
  }
  return 0;
}

#ifdef CS_WITH_GLOO
// Only t refers to its memory: no other handle of its tensor, no view.
bool alone(const torch::Tensor& t) { return t.use_count() == 1 && t.storage().use_count() == 1; }

// backend on 2 thread ranks: rank r reduce-scatters 8 elements of value r + 1
// plus the element's index; the sum is 3 + 2 i, block r in out.
int comm_case(const std::string& backend) {
  const int n = 2;
  DistOptions base;
  base.world_size = n;
  base.backend = backend;
  base.store_addr = "127.0.0.1";
  base.store_port = test::free_port();
  base.timeout_ms = 60000;
  std::atomic<int> failed{0};
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; r++) {
    ranks.emplace_back([&, r] {
      int rc = 1;
      try {
        DistOptions o = base;
        o.rank = r;
        auto comm = make_communicator(o, torch::kCPU);
        rc = [&]() -> int {
          torch::Tensor in = torch::arange(8, torch::kFloat) + float(r + 1);
          torch::Tensor out = torch::zeros({4});
          auto w = comm->reduce_scatter_sum(in, out);
          if (backend == "gloo-staged") CS_CHECK(alone(in));  // copied at the call
          w->elapsed_ms();  // the host clock's: returns once the job is done, before wait()
          // c10d's Gloo worker drops its own reference to the collective's
          // tensors just after it marks the collective done: a moment later.
          for (int i = 0; i < 5000 && !alone(in); i++) std::this_thread::sleep_for(std::chrono::milliseconds(1));
          CS_CHECK(alone(in));
          w->wait();
          torch::Tensor want = torch::arange(8, torch::kFloat).narrow(0, 4 * r, 4) * 2 + 3;
          CS_CHECK(torch::equal(out, want));
          return 0;
        }();
        comm->close();
      } catch (const std::exception& e) {
        std::cerr << "FAIL zero " << backend << " (rank " << r << "): " << e.what() << "\n";
      }
      if (rc) failed++;
    });
  }
  for (auto& t : ranks) t.join();
  return failed ? 1 : 0;
}
#endif

}  // namespace

int zero_tests() {
  int failed = 0;
  failed += run_case("zero", "reducer: reduce-scatter done at the call", [] { return reducer_case(false); });
  failed += run_case("zero", "reducer: inputs held until wait()", [] { return reducer_case(true); });
  failed += run_case("zero", "reducer: grad_accum 3, overlap", [] { return accum_case(true); });
  failed += run_case("zero", "reducer: grad_accum 3, no overlap", [] { return accum_case(false); });
#ifdef CS_WITH_GLOO
  failed += run_case("zero", "gloo reduce-scatter releases its input", [] { return comm_case("gloo"); });
  failed += run_case("zero", "gloo-staged reduce-scatter releases its input", [] { return comm_case("gloo-staged"); });
#endif
  return failed;
}
