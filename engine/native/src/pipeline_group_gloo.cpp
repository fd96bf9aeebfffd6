// pipeline_group_gloo.cpp: the pipeline's groups on CPU ranks: one GlooGroup
// (gloo_group.h: c10d's ProcessGroupGloo) per group, over a PrefixStore on a
// client of the trial's store (gloo_store.h). Gloo's send and recv return at once and complete in wait(), which
// gives exchange() its post-all-then-wait-all semantics.
#ifdef CS_WITH_GLOO

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <algorithm>

#include "comm_watch.h"
#include "gloo_group.h"
#include "gloo_store.h"
#include "model.h"
#include "pipeline_group.h"

namespace cs {
namespace {

class GlooPipeGroup : public PipeGroup {
 public:
  GlooPipeGroup(const c10::intrusive_ptr<c10d::Store>& store, const std::string& prefix,
                int rank, int size, const DistOptions& o)
      : rank_(rank),
        size_(size),
        timeout_(o.timeout_ms),
        pg_(c10::make_intrusive<c10d::PrefixStore>(prefix, store), rank, size, timeout_, GlooNet::Trial,
            o.store_addr) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void exchange(const std::vector<P2POp>& ops) override {
    commwatch::Span span("pipeline_exchange");
    const std::chrono::milliseconds deadline(commwatch::deadline_ms());
    std::vector<GlooWork> works;
    try {
      for (const auto& op : ops) {
        if (!op.t.device().is_cpu() || !op.t.is_contiguous())
          throw CommError("gloo pipeline: needs contiguous CPU tensors");
        // Bytes on the wire: any dtype, bf16 included.
        works.push_back(op.send ? pg_.send(op.t, op.peer, op.tag) : pg_.recv(op.t, op.peer, op.tag));
      }
      for (auto& w : works) w.wait(std::min(timeout_, deadline));
    } catch (const CommError&) {
      throw;
    } catch (const std::exception& e) {
      commwatch::failed(e.what());
      throw CommError("gloo pipeline send/recv (group rank " + std::to_string(rank_) + " of " +
                      std::to_string(size_) + "): " + e.what());
    }
  }

  void all_reduce_sum(torch::Tensor t) override {
    commwatch::Span span("pipeline_all_reduce");
    try {
      const auto limit = std::min(timeout_, std::chrono::milliseconds(commwatch::deadline_ms()));
      on_wire(t, [&](const torch::Tensor& w) { pg_.allreduce(w).wait(limit); });  // bf16 as fp32
    } catch (const std::exception& e) {
      commwatch::failed(e.what());
      throw CommError("gloo pipeline all_reduce (group rank " + std::to_string(rank_) + " of " +
                      std::to_string(size_) + "): " + e.what());
    }
  }

  // ProcessGroupGloo's allgather moves bytes: every dtype (bf16 included) goes
  // as uint8, into views of out (its copy into them is exact).
  void all_gather(const torch::Tensor& in, torch::Tensor out) override {
    if (!in.device().is_cpu() || !out.device().is_cpu() || !in.is_contiguous() || !out.is_contiguous() ||
        out.scalar_type() != in.scalar_type() || out.numel() != in.numel() * size_)
      throw CommError("gloo pipeline all_gather: needs contiguous CPU tensors, out of size() x in's "
                      "elements of in's dtype");
    auto bytes = out.reshape({-1}).view(torch::kByte).view({int64_t(size_), -1});
    std::vector<at::Tensor> outs;
    for (int r = 0; r < size_; r++) outs.push_back(bytes[r]);
    commwatch::Span span("pipeline_all_gather");
    try {
      pg_.allgather(outs, in.reshape({-1}).view(torch::kByte))
          .wait(std::min(timeout_, std::chrono::milliseconds(commwatch::deadline_ms())));
    } catch (const std::exception& e) {
      commwatch::failed(e.what());
      throw CommError("gloo pipeline all_gather (group rank " + std::to_string(rank_) + " of " +
                      std::to_string(size_) + "): " + e.what());
    }
  }

  // Debian's libtorch 1.13 ProcessGroupGloo has no reduce_scatter (it throws
  // "does not support reduce_scatter"): the all-reduce of a copy of in, then
  // this rank's block. The same sums as a reduce-scatter at size() times its
  // traffic; the NCCL groups run ncclReduceScatter.
  void reduce_scatter_sum(const torch::Tensor& in, torch::Tensor out) override {
    if (!in.device().is_cpu() || !out.device().is_cpu() || !in.is_contiguous() || !out.is_contiguous() ||
        out.scalar_type() != in.scalar_type() || in.numel() != out.numel() * size_)
      throw CommError("gloo pipeline reduce_scatter: needs contiguous CPU tensors, in of size() x "
                      "out's elements of out's dtype");
    auto sum = in.clone();
    all_reduce_sum(sum);
    out.copy_(sum.reshape({-1}).narrow(0, int64_t(rank_) * out.numel(), out.numel()).view_as(out));
  }

 private:
  int rank_, size_;
  std::chrono::milliseconds timeout_;
  GlooGroup pg_;
};

}  // namespace

std::vector<std::unique_ptr<PipeGroup>> make_gloo_pipe_groups(const DistOptions& o,
                                                              const std::vector<Partition>& parts) {
  try {
    // A client of the trial's store (without a runner, rank 0's trial
    // communicator serves it).
    c10::intrusive_ptr<c10d::Store> store = make_gloo_store(o, /*serve=*/false);
    std::vector<std::unique_ptr<PipeGroup>> out;
    for (size_t p = 0; p < parts.size(); p++) {
      std::unique_ptr<PipeGroup> mine;
      for (size_t g = 0; g < parts[p].size(); g++) {
        const auto& ranks = parts[p][g];
        for (size_t i = 0; i < ranks.size(); i++) {
          if (ranks[i] != o.rank || ranks.size() < 2) continue;
          const std::string prefix = "cs_pipe/" + std::to_string(p) + "/" + std::to_string(g) + "/";
          mine = std::make_unique<GlooPipeGroup>(store, prefix, int(i), int(ranks.size()), o);
        }
      }
      out.push_back(std::move(mine));
    }
    return out;
  } catch (const CommError&) {
    throw;
  } catch (const std::exception& e) {
    throw CommError("gloo pipeline groups: rank " + std::to_string(o.rank) + " through the store at " +
                    o.store_addr + ":" + std::to_string(o.store_port) + ": " + e.what());
  }
}

}  // namespace cs

#endif  // CS_WITH_GLOO
