// gloo_group.cpp: GlooGroup (gloo_group.h), the one file that holds a c10d
// ProcessGroupGloo and issues its collectives, each under the process-wide
// issue lock.
#ifdef CS_WITH_GLOO

#include "gloo_group.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <cstdlib>
#include <mutex>
#include <utility>

namespace cs {
namespace {

// Held while a collective is issued, never while it is waited on (gloo_group.h).
std::mutex& issue_mutex() {
  static std::mutex m;
  return m;
}

bool is_loopback(const std::string& addr) {
  return addr == "localhost" || addr == "::1" || addr.rfind("127.", 0) == 0;
}

}  // namespace

// The work type of this torch's ProcessGroupGloo (c10d::ProcessGroup::Work on
// older releases, c10d::Work on newer), and the tensor lists it was issued
// with, kept until the work is gone as a caller waiting on it would keep them.
struct GlooWork::Impl {
  std::vector<at::Tensor> tensors;
  std::vector<std::vector<at::Tensor>> outs;
  decltype(std::declval<c10d::ProcessGroupGloo&>().barrier()) work;
};

GlooWork::GlooWork(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GlooWork::GlooWork(GlooWork&&) noexcept = default;
GlooWork& GlooWork::operator=(GlooWork&&) noexcept = default;
GlooWork::~GlooWork() = default;

void GlooWork::wait(std::chrono::milliseconds timeout) { impl_->work->wait(timeout); }

struct GlooGroup::Impl {
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;

  // Issues one collective on w's tensor lists under the lock; its work, to
  // wait on without it.
  template <class Issue>
  GlooWork issue(std::unique_ptr<GlooWork::Impl> w, Issue&& fn) {
    {
      std::lock_guard<std::mutex> lock(issue_mutex());
      w->work = fn(*pg, *w);
    }
    return GlooWork(std::move(w));
  }
  // The same for a collective on the one tensor t.
  template <class Issue>
  GlooWork issue_one(const at::Tensor& t, Issue&& fn) {
    std::unique_ptr<GlooWork::Impl> w(new GlooWork::Impl);
    w->tensors = {t};
    return issue(std::move(w), [&](c10d::ProcessGroupGloo& pg, GlooWork::Impl& wi) { return fn(pg, wi.tensors); });
  }
};

GlooGroup::GlooGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                     std::chrono::milliseconds timeout, GlooNet net, const std::string& store_addr)
    : rank_(rank), size_(size), impl_(new Impl) {
  auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
  const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
  if (net == GlooNet::Loopback)
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  else if (ifname != nullptr && *ifname != '\0')
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
  else if (is_loopback(store_addr))
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(store_addr));
  else
    opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  opts->threads = 1;
  // Not under the lock: the constructor meshes with the other ranks, which
  // may be threads of this process constructing theirs at the same time.
  impl_->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, opts);
}

GlooGroup::~GlooGroup() = default;

GlooWork GlooGroup::allreduce(const at::Tensor& t) {
  return impl_->issue_one(t, [](c10d::ProcessGroupGloo& pg, std::vector<at::Tensor>& v) { return pg.allreduce(v); });
}

GlooWork GlooGroup::allgather(const std::vector<at::Tensor>& outs, const at::Tensor& in) {
  std::unique_ptr<GlooWork::Impl> w(new GlooWork::Impl);
  w->tensors = {in};
  w->outs.push_back(outs);
  return impl_->issue(std::move(w), [](c10d::ProcessGroupGloo& pg, GlooWork::Impl& wi) {
    return pg.allgather(wi.outs, wi.tensors);
  });
}

GlooWork GlooGroup::broadcast(const at::Tensor& t, int root) {
  return impl_->issue_one(t, [root](c10d::ProcessGroupGloo& pg, std::vector<at::Tensor>& v) {
    c10d::BroadcastOptions bo;
    bo.rootRank = root;
    return pg.broadcast(v, bo);
  });
}

GlooWork GlooGroup::send(const at::Tensor& t, int peer, int tag) {
  return impl_->issue_one(t, [peer, tag](c10d::ProcessGroupGloo& pg, std::vector<at::Tensor>& v) {
    return pg.send(v, peer, tag);
  });
}

GlooWork GlooGroup::recv(const at::Tensor& t, int peer, int tag) {
  return impl_->issue_one(t, [peer, tag](c10d::ProcessGroupGloo& pg, std::vector<at::Tensor>& v) {
    return pg.recv(v, peer, tag);
  });
}

GlooWork GlooGroup::barrier() {
  return impl_->issue(std::unique_ptr<GlooWork::Impl>(new GlooWork::Impl),
                      [](c10d::ProcessGroupGloo& pg, GlooWork::Impl&) { return pg.barrier(); });
}

torch::ScalarType gloo_wire_type(const torch::Tensor& t) {
  return t.scalar_type() == torch::kBFloat16 ? torch::kFloat : t.scalar_type();
}

void on_wire(const torch::Tensor& t, const std::function<void(const torch::Tensor&)>& op) {
  const auto type = gloo_wire_type(t);
  if (t.scalar_type() == type && t.is_contiguous()) {
    op(t);
    return;
  }
  // Not t.to(type, ..., MemoryFormat::Contiguous): for a tensor whose
  // suggested format is already "contiguous" (any non-4-d one, a transposed
  // matrix too) that returns t itself, strides and all.
  torch::Tensor w = t.to(type).contiguous();
  op(w);
  torch::NoGradGuard no_grad;
  t.copy_(w);
}

}  // namespace cs

#endif  // CS_WITH_GLOO
