// shadow_group.cpp: ShadowGroup (shadow_group.h), the stretch calibration's
// in-process Gloo group of N.
#ifdef CS_WITH_GLOO

#include "shadow_group.h"

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <chrono>
#include <exception>
#include <string>
#include <thread>

#include "gloo_group.h"
#include "host_queue.h"

namespace cs {
namespace {

constexpr int kTimeoutMS = 120000;  // a shadow collective not done by then is an error

}  // namespace

ShadowGroup::ShadowGroup(int ranks) : ranks_(ranks) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  groups_.resize(size_t(ranks));
  std::vector<std::thread> joins;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(ranks));
  // Every rank's constructor meshes with the others: all at once.
  for (int r = 0; r < ranks; r++) {
    joins.emplace_back([&, r] {
      try {
        groups_[size_t(r)] = std::make_shared<GlooGroup>(store, r, ranks, std::chrono::milliseconds(kTimeoutMS),
                                                         GlooNet::Loopback);
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

ShadowGroup::~ShadowGroup() {
  // The queues (their threads) before the groups they use: rank 0's first,
  // then the helpers', whose last collectives rank 0's completed.
  queues_.clear();
}

std::shared_ptr<CommWork> ShadowGroup::all_reduce(torch::Tensor t) {
  const auto type = gloo_wire_type(t);
  for (int r = 1; r < ranks_; r++) {
    torch::Tensor z = zeros(r, t.numel(), type);
    auto g = groups_[size_t(r)];
    queues_[size_t(r)]->submit([g, z] {
      z.zero_();  // the last sum is still in it
      g->allreduce(z).wait();
    });
  }
  auto g = groups_[0];
  return queues_[0]->submit([g, t] { on_wire(t, [&](const torch::Tensor& w) { g->allreduce(w).wait(); }); });
}

std::shared_ptr<CommWork> ShadowGroup::all_gather(torch::Tensor in, torch::Tensor out) {
  if (out.numel() != in.numel() && out.numel() != in.numel() * ranks_)
    throw CommError("gloo shadow all_gather: out must hold in's elements or the group's " + std::to_string(ranks_) +
                    " x in's");
  const int n = ranks_;
  for (int r = 1; r < n; r++) {
    torch::Tensor z = zeros(r, in.numel(), in.scalar_type());
    torch::Tensor got = torch::empty({in.numel() * n}, in.options());
    auto g = groups_[size_t(r)];
    queues_[size_t(r)]->submit([g, z, got, n] {
      z.zero_();  // an all-reduce of the same size and type left its sum in it
      std::vector<torch::Tensor> outs;
      for (int k = 0; k < n; k++) outs.push_back(got.narrow(0, k * z.numel(), z.numel()));
      g->allgather(outs, z).wait();
    });
  }
  auto g = groups_[0];
  return queues_[0]->submit([g, in, out, n] {
    torch::Tensor flat = in.reshape({-1}).contiguous();
    torch::Tensor got = torch::empty({flat.numel() * n}, flat.options());
    std::vector<torch::Tensor> outs;
    for (int k = 0; k < n; k++) outs.push_back(got.narrow(0, k * flat.numel(), flat.numel()));
    g->allgather(outs, flat).wait();
    torch::NoGradGuard ng;
    out.view({-1}).copy_(got.narrow(0, 0, out.numel()));
  });
}

torch::Tensor ShadowGroup::zeros(int r, int64_t n, torch::ScalarType type) {
  auto& m = zeros_[size_t(r)];
  auto key = std::make_pair(n, int(type));
  auto it = m.find(key);
  if (it == m.end()) it = m.emplace(key, torch::zeros({n}, torch::TensorOptions().dtype(type))).first;
  return it->second;
}

}  // namespace cs

#endif  // CS_WITH_GLOO
