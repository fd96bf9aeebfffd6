// comm_gloo.cpp: CPU ranks through Gloo, via libtorch's c10d ProcessGroupGloo.
// Gloo meshes the ranks through the trial's store (gloo_store.h: the runner's
// rendezvous, or a TCPStore rank 0 serves when no runner started the ranks). Collectives run on a HostQueue
// thread in issue order, so they overlap with the backward pass on the host.
// Gloo has no bfloat16: bf16 tensors travel as fp32.
#include "comm_internal.h"
#include "gloo_group.h"
#include "gloo_store.h"
#include "host_queue.h"
#include "model.h"

namespace cs {
namespace {

// Gloo's own timeout fires first; the host deadline only catches a wedged queue.
constexpr int kHostSlackMS = 10000;

void check_cpu(const torch::Tensor& t, const char* what, bool contiguous = true) {
  if (!t.device().is_cpu() || (contiguous && !t.is_contiguous())) {
    throw CommError(std::string("gloo ") + what + ": needs a " + (contiguous ? "contiguous " : "") +
                    "CPU tensor");
  }
}

class GlooCommunicator : public Communicator {
 public:
  explicit GlooCommunicator(const DistOptions& o)
      : rank_(o.rank), world_(o.world_size), queue_("gloo", o.timeout_ms + kHostSlackMS) {
    auto timeout = std::chrono::milliseconds(o.timeout_ms);
    try {
      // One Gloo thread: the HostQueue already serialises the collectives.
      pg_ = std::make_shared<GlooGroup>(make_gloo_store(o, /*serve=*/true), o.rank, o.world_size, timeout,
                                        GlooNet::Trial, o.store_addr);
    } catch (const ConfigError&) {
      throw;
    } catch (const std::exception& e) {
      throw CommError("gloo: setting up rank " + std::to_string(o.rank) + " of " +
                      std::to_string(o.world_size) + " through the store at " + o.store_addr +
                      ":" + std::to_string(o.store_port) + ": " + e.what());
    }
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::string backend() const override { return "gloo"; }
  std::string version() const override { return "gloo"; }

  int64_t wire_bytes(const torch::Tensor& t) const override {
    int64_t elem = t.scalar_type() == torch::kBFloat16 ? 4 : t.element_size();
    return t.numel() * elem;
  }

  std::shared_ptr<CommWork> all_reduce_sum(torch::Tensor t) override {
    check_cpu(t, "all_reduce");
    auto pg = pg_;
    return queue_.submit([pg, t] {
      on_wire(t, [&](const torch::Tensor& w) { pg->allreduce(w).wait(); });
    });
  }

  std::shared_ptr<CommWork> all_gather(torch::Tensor in, torch::Tensor out) override {
    check_cpu(in, "all_gather");
    check_cpu(out, "all_gather");
    if (out.numel() != in.numel() * world_ || out.scalar_type() != in.scalar_type()) {
      throw CommError("gloo all_gather: output must hold world_size x input elements of its dtype");
    }
    if (in.scalar_type() == torch::kBFloat16) {
      throw CommError("gloo all_gather: bf16 is not supported by Gloo");
    }
    auto pg = pg_;
    int world = world_;
    return queue_.submit([pg, in, out, world] {
      std::vector<torch::Tensor> outs;
      for (int r = 0; r < world; ++r) outs.push_back(out.narrow(0, r * in.numel(), in.numel()).view(in.sizes()));
      pg->allgather(outs, in).wait();
    });
  }

  // The all-reduce and the block's copy both on the queue's thread (the sum
  // and the block are the default's, Communicator::reduce_scatter_sum): in is
  // released when the job ends, not held until wait().
  std::shared_ptr<CommWork> reduce_scatter_sum(torch::Tensor in, torch::Tensor out) override {
    check_cpu(in, "reduce_scatter");
    check_cpu(out, "reduce_scatter");
    if (in.numel() != out.numel() * world_ || in.scalar_type() != out.scalar_type()) {
      throw CommError("gloo reduce_scatter: input must hold world_size x output elements of its dtype");
    }
    auto pg = pg_;
    const int64_t at = int64_t(rank_) * out.numel();
    return queue_.submit([pg, in, out, at] {
      on_wire(in, [&](const torch::Tensor& w) { pg->allreduce(w).wait(); });
      torch::NoGradGuard ng;
      out.copy_(in.narrow(0, at, out.numel()));
    });
  }

  void broadcast(torch::Tensor t, int root) override {
    check_cpu(t, "broadcast", false);
    auto pg = pg_;
    queue_.run([pg, t, root] {
      on_wire(t, [&](const torch::Tensor& w) { pg->broadcast(w, root).wait(); });
    });
  }

  void send(torch::Tensor t, int peer) override {
    check_cpu(t, "send", false);
    auto pg = pg_;
    queue_.run([pg, t, peer] {
      on_wire(t, [&](const torch::Tensor& w) { pg->send(w, peer, 0).wait(); });
    });
  }

  void recv(torch::Tensor t, int peer) override {
    check_cpu(t, "recv", false);
    auto pg = pg_;
    queue_.run([pg, t, peer] {
      on_wire(t, [&](const torch::Tensor& w) { pg->recv(w, peer, 0).wait(); });
    });
  }

  void barrier() override {
    auto pg = pg_;
    queue_.run([pg] { pg->barrier().wait(); });
  }

 private:
  int rank_, world_;
  std::shared_ptr<GlooGroup> pg_;
  HostQueue queue_;  // last: destroyed (joined) before pg_
};

}  // namespace

std::unique_ptr<Communicator> make_gloo_communicator(const DistOptions& opts) {
  return std::make_unique<GlooCommunicator>(opts);
}

}  // namespace cs
