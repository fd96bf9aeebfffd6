// pipeline_group_nccl.cpp: the pipeline's groups on GPU ranks (built only with
// CS_WITH_NCCL). Each partition's groups are split from the world
// communicator (ncclCommSplit, NCCL 2.18 and newer: one call a partition on
// every rank, color the group's index in its partition, key the rank's place
// in the group, NCCL_SPLIT_NOCOLOR in a group of one). With older NCCL (the
// headers at build time or the library at run time) the groups come from
// unique ids instead, and the rank logs why: rank 0 makes one id per group of
// two or more ranks and broadcasts them over the trial communicator; each rank
// then initialises its groups in partition order (the same order on every
// rank, so no two ranks wait on each other's second group). Sends and receives
// of one exchange run between ncclGroupStart and ncclGroupEnd on the current
// stream; the host then waits for them against dist.timeout_ms (NCCL has no
// timeout of its own) and aborts the communicator when they do not finish. The
// groups are non-blocking communicators like the world's (nccl_util.h) and
// register their abort with comm_watch.h, so a failure anywhere aborts every
// communicator of the rank. The trainer closes them before the world.
#ifdef CS_WITH_NCCL

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

#include "comm_watch.h"
#include "model.h"
#include "nccl_util.h"
#include "pipeline_group.h"

namespace cs {
namespace {

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw CommError(std::string("nccl pipeline: CUDA error in ") + what + ": " + cudaGetErrorString(e));
}

ncclDataType_t float_type(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat: return ncclFloat32;
    case torch::kDouble: return ncclFloat64;
    case torch::kHalf: return ncclFloat16;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
    case torch::kBFloat16: return ncclBfloat16;
#endif
    default: break;
  }
  throw CommError(std::string("nccl pipeline all_reduce/reduce_scatter: unsupported dtype ") + c10::toString(t));
}

class NcclPipeGroup : public PipeGroup {
 public:
  // Owns comm, initialised (from a unique id or split from the world's).
  NcclPipeGroup(ncclComm_t comm, int rank, int size, int device)
      : rank_(rank), size_(size), dev_(device), comm_(comm) {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(dev_));
    const cudaError_t e = cudaEventCreateWithFlags(&done_, cudaEventDisableTiming);
    if (e != cudaSuccess) {
      ncclCommAbort(comm_);
      cuda_ok(e, "cudaEventCreate");
    }
    // The trainer's teardown after a failure (comm_watch.h abort_all) runs on
    // the thread that uses the group: no lock is needed.
    abort_id_ = commwatch::on_abort([this] { abort(); });
  }

  ~NcclPipeGroup() override {
    commwatch::forget(abort_id_);
    if (!closed_ && !aborted_) nccl_destroy(comm_);
    cudaEventDestroy(done_);
  }

  void close() override {
    commwatch::forget(abort_id_);
    if (closed_ || aborted_) return;
    closed_ = true;
    const ncclResult_t r = nccl_destroy(comm_);
    if (r == ncclInProgress) throw CommError("nccl pipeline: ncclCommFinalize not done after dist.timeout_ms; communicator aborted");
    check(r, "ncclCommFinalize/ncclCommDestroy");
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void exchange(const std::vector<P2POp>& ops) override {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(dev_));
    cudaStream_t s = c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(dev_)).stream();
    if (aborted_) throw CommError("nccl pipeline: the group's communicator was aborted");
    commwatch::Span span("pipeline_exchange");
    check(ncclGroupStart(), "ncclGroupStart");
    for (const auto& op : ops) {
      if (!op.t.is_cuda() || op.t.device().index() != dev_ || !op.t.is_contiguous()) {
        ncclGroupEnd();
        throw CommError("nccl pipeline: needs contiguous tensors on cuda:" + std::to_string(dev_));
      }
      const size_t bytes = size_t(op.t.numel()) * op.t.element_size();
      ncclResult_t r = op.send ? ncclSend(op.t.data_ptr(), bytes, ncclUint8, op.peer, comm_, s)
                               : ncclRecv(op.t.data_ptr(), bytes, ncclUint8, op.peer, comm_, s);
      if (r != ncclSuccess) {
        ncclGroupEnd();
        check(r, op.send ? "ncclSend" : "ncclRecv");
      }
    }
    check(settle(ncclGroupEnd()), "ncclGroupEnd");
    wait(s, "send/recv");
  }

  void all_reduce_sum(torch::Tensor t) override {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(dev_));
    cudaStream_t s = c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(dev_)).stream();
    if (aborted_) throw CommError("nccl pipeline: the group's communicator was aborted");
    commwatch::Span span("pipeline_all_reduce");
    check(settle(ncclAllReduce(t.data_ptr(), t.data_ptr(), size_t(t.numel()), float_type(t.scalar_type()),
                               ncclSum, comm_, s)),
          "ncclAllReduce");
    wait(s, "all_reduce");
  }

  // The bytes of any dtype (bf16 included) as ncclUint8: exact.
  void all_gather(const torch::Tensor& in, torch::Tensor out) override {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(dev_));
    cudaStream_t s = c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(dev_)).stream();
    if (aborted_) throw CommError("nccl pipeline: the group's communicator was aborted");
    check_pair(in, out, out.numel() == in.numel() * size_, "all_gather");
    commwatch::Span span("pipeline_all_gather");
    const size_t bytes = size_t(in.numel()) * in.element_size();
    check(settle(ncclAllGather(in.data_ptr(), out.data_ptr(), bytes, ncclUint8, comm_, s)), "ncclAllGather");
    wait(s, "all_gather");
  }

  void reduce_scatter_sum(const torch::Tensor& in, torch::Tensor out) override {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(dev_));
    cudaStream_t s = c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(dev_)).stream();
    if (aborted_) throw CommError("nccl pipeline: the group's communicator was aborted");
    check_pair(in, out, in.numel() == out.numel() * size_, "reduce_scatter");
    commwatch::Span span("pipeline_reduce_scatter");
    check(settle(ncclReduceScatter(in.data_ptr(), out.data_ptr(), size_t(out.numel()),
                                   float_type(in.scalar_type()), ncclSum, comm_, s)),
          "ncclReduceScatter");
    wait(s, "reduce_scatter");
  }

 private:
  void check(ncclResult_t r, const char* what) {
    if (r == ncclSuccess) return;
    std::string msg = std::string("nccl pipeline: ") + what + " (group rank " + std::to_string(rank_) + "): ";
#if CS_NCCL_NONBLOCKING
    if (r == ncclInProgress) {
      abort();
      msg += "not enqueued after dist.timeout_ms=" + std::to_string(commwatch::deadline_ms()) +
             "; communicator aborted";
      commwatch::failed(msg);
      throw CommError(msg);
    }
#endif
    msg += nccl_error_text(r);
    commwatch::failed(msg);
    throw CommError(msg);
  }

  void check_pair(const torch::Tensor& in, const torch::Tensor& out, bool sizes_fit, const char* what) const {
    for (const auto* t : {&in, &out})
      if (!t->is_cuda() || t->device().index() != dev_ || !t->is_contiguous())
        throw CommError(std::string("nccl pipeline ") + what + ": needs contiguous tensors on cuda:" +
                        std::to_string(dev_));
    if (!sizes_fit || in.scalar_type() != out.scalar_type())
      throw CommError(std::string("nccl pipeline ") + what + ": the buffers' sizes or dtypes do not fit a group of " +
                      std::to_string(size_));
  }

  // A call's final result on the non-blocking communicator (nccl_util.h).
  ncclResult_t settle(ncclResult_t r) {
    return nccl_settle(r, [&](ncclResult_t* q) { return ncclCommGetAsyncError(comm_, q); });
  }

  void abort() {
    if (aborted_ || closed_) return;
    ncclCommAbort(comm_);
    aborted_ = true;
  }

  // Blocks the host until the work queued on s is done, or aborts.
  void wait(cudaStream_t s, const char* what) {
    cuda_ok(cudaEventRecord(done_, s), "cudaEventRecord");
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      cudaError_t q = cudaEventQuery(done_);
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) cuda_ok(q, "cudaEventQuery");
      ncclResult_t async = ncclSuccess;
      std::string failure;
      if (ncclCommGetAsyncError(comm_, &async) == ncclSuccess && async != ncclSuccess
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
          && async != ncclInProgress
#endif
      )
        failure = std::string("asynchronous error: ") + ncclGetErrorString(async);
      else if (std::chrono::steady_clock::now() - start > std::chrono::milliseconds(commwatch::deadline_ms()))
        failure = "not finished after dist.timeout_ms=" + std::to_string(commwatch::deadline_ms());
      if (!failure.empty()) {
        abort();
        const std::string msg = std::string("nccl pipeline ") + what + " (group rank " + std::to_string(rank_) +
                                " of " + std::to_string(size_) + "): " + failure + "; communicator aborted";
        commwatch::failed(msg);
        throw CommError(msg);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  int rank_, size_, dev_;
  ncclComm_t comm_ = nullptr;
  cudaEvent_t done_ = nullptr;
  bool aborted_ = false, closed_ = false;
  int abort_id_ = 0;
};

#if CS_NCCL_SPLIT
// Each partition with a group of two or more ranks split from the world's
// communicator; this rank's group's communicator, its rank in it checked
// against its place in the group (key order).
std::vector<std::unique_ptr<PipeGroup>> split_groups(const DistOptions& o, Communicator& world,
                                                     const std::vector<Partition>& parts, int dev) {
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(dev));
  std::vector<std::unique_ptr<PipeGroup>> out(parts.size());
  for (size_t p = 0; p < parts.size(); p++) {
    bool any = false;  // the same answer on every rank: all of them split, or none
    int color = NCCL_SPLIT_NOCOLOR, key = 0, size = 1;
    for (size_t g = 0; g < parts[p].size(); g++) {
      const auto& ranks = parts[p][g];
      if (ranks.size() < 2) continue;
      any = true;
      for (size_t i = 0; i < ranks.size(); i++)
        if (ranks[i] == o.rank) color = int(g), key = int(i), size = int(ranks.size());
    }
    if (!any) continue;
    ncclComm_t c = nccl_split(world, color, key, "nccl pipeline");
    if (color == NCCL_SPLIT_NOCOLOR) {
      if (c != nullptr) throw std::logic_error("nccl pipeline: ncclCommSplit gave a communicator for no color");
      continue;
    }
    if (c == nullptr) throw std::logic_error("nccl pipeline: ncclCommSplit gave no communicator");
    auto group = std::make_unique<NcclPipeGroup>(c, key, size, dev);  // owns c from here
    int n = 0, r = -1;
    if (ncclCommCount(c, &n) != ncclSuccess || ncclCommUserRank(c, &r) != ncclSuccess || n != size || r != key)
      throw std::logic_error("nccl pipeline: the split communicator has rank " + std::to_string(r) + " of " +
                             std::to_string(n) + ", the group wants " + std::to_string(key) + " of " +
                             std::to_string(size));
    out[p] = std::move(group);
  }
  return out;
}
#endif

// The groups from unique ids (NCCL older than 2.18): one id per group of two
// or more ranks, in partition order, made by rank 0 and broadcast over world.
std::vector<std::unique_ptr<PipeGroup>> id_groups(const DistOptions& o, torch::Device device, Communicator& world,
                                                  const std::vector<Partition>& parts, int dev) {
  std::vector<std::pair<size_t, size_t>> groups;
  for (size_t p = 0; p < parts.size(); p++)
    for (size_t g = 0; g < parts[p].size(); g++)
      if (parts[p][g].size() > 1) groups.emplace_back(p, g);
  const int64_t idb = int64_t(sizeof(ncclUniqueId));
  auto host = torch::zeros({int64_t(groups.size()) * idb}, torch::kUInt8);
  if (o.rank == 0) {
    for (size_t k = 0; k < groups.size(); k++) {
      ncclUniqueId id;
      ncclResult_t r = ncclGetUniqueId(&id);
      if (r != ncclSuccess) throw CommError(std::string("nccl pipeline: ncclGetUniqueId: ") + ncclGetErrorString(r));
      std::memcpy(host.data_ptr<uint8_t>() + k * idb, &id, sizeof id);
    }
  }
  if (!groups.empty()) {
    auto d = host.to(device);
    world.broadcast(d, 0);
    host = d.cpu();
  }
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(dev));
  std::vector<std::unique_ptr<PipeGroup>> out(parts.size());
  for (size_t k = 0; k < groups.size(); k++) {
    const auto& ranks = parts[groups[k].first][groups[k].second];
    for (size_t i = 0; i < ranks.size(); i++) {
      if (ranks[i] != o.rank) continue;
      ncclUniqueId id;
      std::memcpy(&id, host.data_ptr<uint8_t>() + k * idb, sizeof id);
      const int size = int(ranks.size());
      out[groups[k].first] =
          std::make_unique<NcclPipeGroup>(nccl_init_rank(size, id, int(i), "nccl pipeline"), int(i), size, dev);
    }
  }
  return out;
}

}  // namespace

std::vector<std::unique_ptr<PipeGroup>> make_nccl_pipe_groups(const DistOptions& o,
                                                              torch::Device device,
                                                              Communicator& world,
                                                              const std::vector<Partition>& parts) {
  const int dev = device.index() < 0 ? 0 : device.index();
  const std::string why = nccl_split_unavailable(world);
#if CS_NCCL_SPLIT
  if (why.empty()) {
    auto out = split_groups(o, world, parts, dev);
    int n = 0;
    for (const auto& g : out) n += g != nullptr;
    // One line a rank, at set-up: the GPU tests read it (TestGPUMultiTP).
    if (n > 0) std::fprintf(stderr, "nccl pipeline: rank %d: %d groups split from the world communicator (ncclCommSplit)\n", o.rank, n);
    return out;
  }
#endif
  std::fprintf(stderr, "nccl pipeline: rank %d: groups from unique ids, not ncclCommSplit: %s\n", o.rank,
               why.c_str());
  return id_groups(o, device, world, parts, dev);
}

}  // namespace cs

#endif  // CS_WITH_NCCL
