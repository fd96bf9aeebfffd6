// comm_staged.cpp: the host-staged backend (dist.h make_staged_communicator,
// pipeline_group.h stage_pipe_groups). It lets several ranks share one GPU: NCCL
// refuses two ranks on one device ("Duplicate GPU detected"), Gloo does not.
//
// Every collective copies its tensor to a host buffer (pinned for a CUDA
// tensor), runs the Gloo communicator (comm_gloo.cpp) on that CPU buffer and
// copies the result back. On a GPU the data path is the NCCL path's: the
// collective is ordered after the work queued so far on the caller's current
// stream by a `ready` event, the device-to-host and host-to-device copies run
// on a dedicated high-priority communication stream, and wait() makes the
// current stream wait on an `end` event recorded there. The staging thread
// (a HostQueue) keeps the collectives in issue order, so the reducer's
// buckets overlap with the backward pass as on NCCL. The reduce-scatter (ZeRO-2)
// is the exception: its device-to-host copy is queued on a copy stream of its
// own when it is issued, so the caller's buffer is free once that copy has
// run rather than once the thread reaches the collective.
//
// The same code runs with CPU tensors with dist.backend gloo-staged (the copies
// are then host memcpys): CPU CI exercises it without a GPU.
//
// Gloo has no bfloat16: a bf16 all-reduce is staged as fp32 (converted on the
// device before the copy), and every other bf16 transfer (all-gather,
// broadcast, send, receive) travels as raw bytes, which is exact.
//
// Only device-generic c10 APIs (c10::Stream, c10::Event) touch the GPU here, so
// the file builds against a CPU-only libtorch as well.
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <chrono>
#include <thread>

#include "comm_internal.h"
#include "host_queue.h"
#include "model.h"
#include "pipeline_group.h"

namespace cs {
namespace {

// Gloo's own timeout fires first; the host deadline only catches a wedged queue.
constexpr int kHostSlackMS = 20000;

// A host buffer for t: pinned when t lives on a GPU (async copies), row-major,
// of dtype (t's own unless told).
torch::Tensor host_buffer(const torch::Tensor& t, torch::ScalarType dtype) {
  auto opts = torch::TensorOptions().dtype(dtype).device(torch::kCPU);
  if (t.is_cuda()) opts = opts.pinned_memory(true);
  return torch::empty(t.sizes(), opts);
}

// The bytes of a contiguous tensor as a flat uint8 tensor sharing its storage
// (Gloo moves bf16 this way).
torch::Tensor as_bytes(const torch::Tensor& t) {
  return t.reshape({-1}).view(torch::kByte);
}

// Gloo can carry this dtype as is.
bool gloo_dtype(torch::ScalarType s) { return s != torch::kBFloat16; }

// The device side of the staging: the communication stream and the events.
// Absent (cuda() false) for CPU tensors.
class DeviceSide {
 public:
  explicit DeviceSide(torch::Device device) : device_(device) {
    if (!device.is_cuda()) return;
    c10::impl::VirtualGuardImpl impl(device.type());
    if (!device_.has_index()) device_ = impl.getDevice();  // "cuda": the current one
    comm_ = impl.getStreamFromGlobalPool(device_, /*isHighPriority=*/true);
    // Another pool than comm_'s (normal priority): never the same stream.
    copy_ = impl.getStreamFromGlobalPool(device_, /*isHighPriority=*/false);
  }
  bool cuda() const { return device_.is_cuda(); }
  torch::Device device() const { return device_; }
  // The caller's current stream on this device.
  c10::Stream current() const {
    c10::impl::VirtualGuardImpl impl(device_.type());
    return impl.getStream(device_);
  }
  c10::Stream comm() const { return *comm_; }
  // The reduce-scatter's copies to the host at the call: a stream of their own,
  // so that the staging thread's later work on comm() does not queue behind
  // them (which would hold each collective's copy back until the backward ends).
  c10::Stream copy() const { return *copy_; }

 private:
  torch::Device device_;
  c10::optional<c10::Stream> comm_, copy_;
};

// What one staged collective moves: the device tensor, its host copy, and how
// the host copy maps to the device tensor.
struct Staging {
  torch::Tensor dev;     // the caller's tensor (written back when copy_back)
  torch::Tensor wire;    // on the device: dev, or its fp32 copy (bf16 all-reduce)
  torch::Tensor host;    // the host buffer Gloo works on
  bool copy_back = true;
};

class StagedWork : public CommWork {
 public:
  StagedWork(std::shared_ptr<HostWork> work, std::shared_ptr<c10::Event> end, DeviceSide side)
      : work_(std::move(work)), end_(std::move(end)), side_(side) {}
  void wait() override {
    work_->wait();
    if (end_) {
      c10::DeviceGuard g(side_.device());
      end_->block(side_.current());  // later work on the current stream sees the result
    }
  }
  double elapsed_ms() override { return work_->elapsed_ms(); }  // staging included

 private:
  std::shared_ptr<HostWork> work_;
  std::shared_ptr<c10::Event> end_;
  DeviceSide side_;
};

class StagedCommunicator : public Communicator {
 public:
  StagedCommunicator(std::unique_ptr<Communicator> host, torch::Device device, int timeout_ms)
      : host_(std::move(host)), side_(device), queue_("staged", timeout_ms + kHostSlackMS) {}

  ~StagedCommunicator() override = default;

  int rank() const override { return host_->rank(); }
  int world_size() const override { return host_->world_size(); }
  std::string backend() const override { return "gloo-staged"; }
  std::string version() const override { return host_->version() + " (host-staged)"; }

  int64_t wire_bytes(const torch::Tensor& t) const override {
    int64_t elem = t.scalar_type() == torch::kBFloat16 ? 4 : t.element_size();
    return t.numel() * elem;
  }

  std::shared_ptr<CommWork> all_reduce_sum(torch::Tensor t) override {
    check(t, "all_reduce");
    Staging s;
    s.dev = t;
    return stage_async(std::move(s), /*reduce_as_fp32=*/true, [this](Staging& st) {
      host_->all_reduce_sum(st.host)->wait();
    });
  }

  std::shared_ptr<CommWork> all_gather(torch::Tensor in, torch::Tensor out) override {
    check(in, "all_gather");
    check(out, "all_gather");
    if (out.numel() != in.numel() * world_size() || out.scalar_type() != in.scalar_type())
      throw CommError("staged all_gather: output must hold world_size x input elements of its dtype");
    if (!in.is_contiguous() || !out.is_contiguous())
      throw CommError("staged all_gather: needs contiguous tensors");
    // Two stagings in one job: the input goes to the host, the output comes back.
    auto side = side_;
    auto ready = record_ready();
    auto end = side.cuda() ? std::make_shared<c10::Event>(side.device().type()) : nullptr;
    Communicator* host = host_.get();
    return std::make_shared<StagedWork>(
        queue_.submit([side, ready, end, host, in, out] {
          c10::OptionalDeviceGuard dg;
          if (side.cuda()) dg.reset_device(side.device());
          torch::Tensor hin = host_buffer(in, in.scalar_type());
          torch::Tensor hout = host_buffer(out, out.scalar_type());
          to_host(side, ready.get(), in, hin);
          if (gloo_dtype(in.scalar_type())) {
            host->all_gather(hin, hout)->wait();
          } else {
            host->all_gather(as_bytes(hin), as_bytes(hout))->wait();
          }
          to_device(side, hout, out, end.get());
        }),
        end, side);
  }

  // ZeRO-2's reduce-scatter. in is copied to a host buffer when this is
  // called (on a GPU: on the comm stream after the caller's queued work, the
  // stream recorded on in's memory in the caching allocator), so no reference
  // to it outlives this call: its device memory is free once the copy has run,
  // however long the queue takes to reach the collective. The job sums the
  // host buffer (the host communicator's all-reduce: the same sum as the
  // default's, Communicator::reduce_scatter_sum) and copies block rank() back
  // into out. bf16 is summed as fp32, as all_reduce_sum.
  std::shared_ptr<CommWork> reduce_scatter_sum(torch::Tensor in, torch::Tensor out) override {
    check(in, "reduce_scatter");
    check(out, "reduce_scatter");
    if (in.numel() != out.numel() * world_size() || in.scalar_type() != out.scalar_type())
      throw CommError("staged reduce_scatter: input must hold world_size x output elements of its dtype");
    auto side = side_;
    const bool fp32 = !gloo_dtype(in.scalar_type());
    torch::Tensor host = host_buffer(in, fp32 ? torch::kFloat : in.scalar_type());
    std::shared_ptr<c10::Event> copied;
    {
      torch::NoGradGuard ng;
      if (!side.cuda()) {
        host.copy_(in);
      } else {
        c10::DeviceGuard g(side.device());
        auto ready = record_ready();
        c10::Stream copy = side.copy();
        ready->block(copy);
        c10::StreamGuard sg(copy);
        torch::Tensor wire = fp32 ? in.to(torch::kFloat) : in;  // made on copy: ordered there
        host.copy_(wire, /*non_blocking=*/true);
        copied = std::make_shared<c10::Event>(side.device().type());
        copied->record(copy);
        c10::impl::VirtualGuardImpl impl(side.device().type());
        impl.recordDataPtrOnStream(in.storage().data_ptr(), copy);
      }
    }
    auto end = side.cuda() ? std::make_shared<c10::Event>(side.device().type()) : nullptr;
    Communicator* h = host_.get();
    const int64_t at = int64_t(rank()) * out.numel();
    return std::make_shared<StagedWork>(
        queue_.submit([side, copied, end, h, host, out, at] {
          c10::OptionalDeviceGuard dg;
          if (side.cuda()) dg.reset_device(side.device());
          while (copied && !copied->query()) std::this_thread::sleep_for(std::chrono::microseconds(20));
          h->all_reduce_sum(host)->wait();
          torch::NoGradGuard ng;
          torch::Tensor block = host.narrow(0, at, out.numel());
          if (block.scalar_type() != out.scalar_type()) block = block.to(out.scalar_type());
          to_device(side, block, out, end.get());
        }),
        end, side);
  }

  void broadcast(torch::Tensor t, int root) override {
    check(t, "broadcast", /*contiguous=*/false);
    Staging s;
    s.dev = t;
    stage_async(std::move(s), false, [this, root](Staging& st) {
      host_->broadcast(gloo_dtype(st.host.scalar_type()) ? st.host : as_bytes(st.host), root);
    })->wait();
  }

  void send(torch::Tensor t, int peer) override {
    check(t, "send", false);
    Staging s;
    s.dev = t;
    s.copy_back = false;
    stage_async(std::move(s), false, [this, peer](Staging& st) {
      host_->send(gloo_dtype(st.host.scalar_type()) ? st.host : as_bytes(st.host), peer);
    })->wait();
  }

  void recv(torch::Tensor t, int peer) override {
    check(t, "recv", false);
    Staging s;
    s.dev = t;
    stage_async(std::move(s), false, [this, peer](Staging& st) {
      host_->recv(gloo_dtype(st.host.scalar_type()) ? st.host : as_bytes(st.host), peer);
    })->wait();
  }

  void barrier() override {
    queue_.run([this] { host_->barrier(); });
  }

  void close() override {
    queue_.run([] {});  // what was queued before has finished
    host_->close();
  }

 private:
  void check(const torch::Tensor& t, const char* what, bool contiguous = true) const {
    const bool here = side_.cuda() ? (t.is_cuda() && t.device().index() == side_.device().index())
                                   : t.device().is_cpu();
    if (!here || (contiguous && !t.is_contiguous())) {
      throw CommError(std::string("staged ") + what + ": needs a " + (contiguous ? "contiguous " : "") +
                      "tensor on " + side_.device().str() + ", got " + t.device().str());
    }
  }

  // The event that orders a collective after the work queued so far on the
  // caller's current stream (nullptr on the CPU).
  std::shared_ptr<c10::Event> record_ready() const {
    if (!side_.cuda()) return nullptr;
    c10::DeviceGuard g(side_.device());
    auto ev = std::make_shared<c10::Event>(side_.device().type());
    ev->record(side_.current());
    return ev;
  }

  // Device (or CPU) tensor src to the host buffer dst, on the comm stream after
  // ready; returns when dst holds the bytes.
  static void to_host(const DeviceSide& side, c10::Event* ready, const torch::Tensor& src,
                      torch::Tensor& dst) {
    torch::NoGradGuard ng;
    if (!side.cuda()) {
      dst.copy_(src);
      return;
    }
    c10::Stream comm = side.comm();
    ready->block(comm);
    c10::StreamGuard sg(comm);
    dst.copy_(src, /*non_blocking=*/true);
    comm.synchronize();
  }

  // The host buffer src back into the device (or CPU) tensor dst, on the comm
  // stream, recording end there; returns when dst holds the bytes.
  static void to_device(const DeviceSide& side, const torch::Tensor& src, const torch::Tensor& dst,
                        c10::Event* end) {
    torch::NoGradGuard ng;
    torch::Tensor d = dst;
    if (!side.cuda()) {
      d.copy_(src);
      return;
    }
    c10::Stream comm = side.comm();
    c10::StreamGuard sg(comm);
    d.copy_(src, /*non_blocking=*/true);
    if (end) end->record(comm);
    comm.synchronize();  // the pinned buffer may be reused once the job returns
  }

  // Queues one staged collective: dev → host (bf16 as fp32 when reduce_as_fp32),
  // op on the host buffer, host → dev when copy_back.
  template <typename Op>
  std::shared_ptr<CommWork> stage_async(Staging s, bool reduce_as_fp32, Op op) {
    auto side = side_;
    auto ready = record_ready();
    auto end = side.cuda() ? std::make_shared<c10::Event>(side.device().type()) : nullptr;
    const bool fp32 = reduce_as_fp32 && !gloo_dtype(s.dev.scalar_type());
    auto work = queue_.submit([side, ready, end, s, fp32, op]() mutable {
      c10::OptionalDeviceGuard dg;
      if (side.cuda()) dg.reset_device(side.device());
      torch::NoGradGuard ng;
      if (fp32 && side.cuda()) {  // convert on the device, on the comm stream after ready
        ready->block(side.comm());
        c10::StreamGuard sg(side.comm());
        s.wire = s.dev.to(torch::kFloat);
      } else {
        s.wire = s.dev;
      }
      s.host = host_buffer(s.dev, fp32 ? torch::kFloat : s.dev.scalar_type());
      to_host(side, ready.get(), s.wire, s.host);
      op(s);
      if (s.copy_back) {
        to_device(side, s.host, s.dev, end.get());
      } else if (end) {
        end->record(side.comm());
      }
    });
    return std::make_shared<StagedWork>(work, end, side);
  }

  std::unique_ptr<Communicator> host_;
  DeviceSide side_;
  HostQueue queue_;  // last: destroyed (joined) before host_
};

// A pipeline group whose tensors are staged through host buffers. The pipeline
// waits on every exchange (as on NCCL), so the copies run on the caller's
// current stream and block the host.
class StagedPipeGroup : public PipeGroup {
 public:
  StagedPipeGroup(std::unique_ptr<PipeGroup> host, torch::Device device)
      : host_(std::move(host)), device_(device) {}
  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }

  void exchange(const std::vector<P2POp>& ops) override {
    torch::NoGradGuard ng;
    std::vector<P2POp> staged(ops.size());
    for (size_t i = 0; i < ops.size(); i++) {
      staged[i] = ops[i];
      torch::Tensor h = host_buffer(ops[i].t, ops[i].t.scalar_type());
      if (ops[i].send) h.copy_(ops[i].t);  // synchronous: after the current stream's work
      staged[i].t = h;
    }
    host_->exchange(staged);  // bytes on the wire: bf16 included
    for (size_t i = 0; i < ops.size(); i++) {
      if (!ops[i].send) {
        torch::Tensor d = ops[i].t;
        d.copy_(staged[i].t);
      }
    }
  }

  void all_reduce_sum(torch::Tensor t) override {
    torch::NoGradGuard ng;
    torch::Tensor h = host_buffer(t, gloo_dtype(t.scalar_type()) ? t.scalar_type() : torch::kFloat);
    h.copy_(t);
    host_->all_reduce_sum(h);
    t.copy_(h);
  }

  // Bytes on the wire (the Gloo group's all_gather takes any dtype): exact.
  void all_gather(const torch::Tensor& in, torch::Tensor out) override {
    torch::NoGradGuard ng;
    torch::Tensor hi = host_buffer(in, in.scalar_type()), ho = host_buffer(out, out.scalar_type());
    hi.copy_(in);
    host_->all_gather(hi, ho);
    out.copy_(ho);
  }

  // bf16 staged as fp32, as all_reduce_sum.
  void reduce_scatter_sum(const torch::Tensor& in, torch::Tensor out) override {
    torch::NoGradGuard ng;
    const auto dt = gloo_dtype(in.scalar_type()) ? in.scalar_type() : torch::kFloat;
    torch::Tensor hi = host_buffer(in, dt), ho = host_buffer(out, dt);
    hi.copy_(in);
    host_->reduce_scatter_sum(hi, ho);
    out.copy_(ho);
  }

  void close() override { host_->close(); }

 private:
  std::unique_ptr<PipeGroup> host_;
  torch::Device device_;
};

}  // namespace

std::unique_ptr<Communicator> make_staged_communicator(std::unique_ptr<Communicator> host,
                                                       torch::Device device, int timeout_ms) {
  return std::make_unique<StagedCommunicator>(std::move(host), device, timeout_ms);
}

std::vector<std::unique_ptr<PipeGroup>> stage_pipe_groups(std::vector<std::unique_ptr<PipeGroup>> groups,
                                                          torch::Device device) {
  for (auto& g : groups) {
    if (g) g = std::make_unique<StagedPipeGroup>(std::move(g), device);
  }
  return groups;
}

}  // namespace cs
