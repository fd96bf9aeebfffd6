// comm_nccl.cpp: GPU ranks through raw NCCL (built only with CS_WITH_NCCL).
//
// One communicator per engine from the unique id rank 0 made
// (nccl_unique_id_hex) and the runner handed to every rank. Collectives run on
// a dedicated non-blocking stream that first waits for the work queued so far
// on the caller's current stream; CUDA events around each one time it. NCCL has
// no timeout of its own, so a watchdog thread polls the outstanding events and
// ncclCommGetAsyncError: a collective past the deadline (dist.timeout_ms, live
// in comm_watch.h), or an async error, aborts the communicator (ncclCommAbort)
// and every later call throws CommError with NCCL's text. The communicator is
// non-blocking (nccl_util.h): its init is polled under the deadline, and no
// lock is held across a call that could block, so the watchdog's abort never
// waits behind an enqueue. Every collective counts in comm_watch's progress.
// NCCL's env knobs (NCCL_ALGO, NCCL_PROTO, ...) apply as read by the init in
// this fresh process.
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "comm_internal.h"
#include "comm_watch.h"
#include "model.h"
#include "nccl_util.h"

namespace cs {
namespace {

std::string nccl_text(ncclResult_t r) { return nccl_error_text(r); }

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw CommError(std::string("nccl: CUDA error in ") + what + ": " + cudaGetErrorString(e));
}

ncclDataType_t nccl_type(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat: return ncclFloat32;
    case torch::kHalf: return ncclFloat16;
    case torch::kDouble: return ncclFloat64;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
    case torch::kBFloat16: return ncclBfloat16;
#endif
    case torch::kInt: return ncclInt32;
    case torch::kLong: return ncclInt64;
    case torch::kByte: return ncclUint8;
    case torch::kChar: return ncclInt8;
    default: break;
  }
  throw CommError(std::string("nccl: unsupported dtype ") + c10::toString(t));
}

ncclUniqueId parse_id(const std::string& hex) {
  ncclUniqueId id;
  if (hex.size() != 2 * sizeof(id.internal)) {
    throw ConfigError("dist.nccl_id must be " + std::to_string(2 * sizeof(id.internal)) +
                      " hex characters (cs_nccl_unique_id on rank 0), got " + std::to_string(hex.size()));
  }
  auto nibble = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    throw ConfigError(std::string("dist.nccl_id: not a hex character: '") + c + "'");
  };
  for (size_t i = 0; i < sizeof(id.internal); ++i) {
    id.internal[i] = static_cast<char>(nibble(hex[2 * i]) << 4 | nibble(hex[2 * i + 1]));
  }
  return id;
}

// The start and end events of one collective; shared with the watchdog.
struct Events {
  cudaEvent_t ready = nullptr, start = nullptr, end = nullptr;
  std::chrono::steady_clock::time_point issued = std::chrono::steady_clock::now();
  std::string what;
  Events() {
    cuda_check(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreate");
    cuda_check(cudaEventCreate(&start), "cudaEventCreate");
    cuda_check(cudaEventCreate(&end), "cudaEventCreate");
  }
  ~Events() {
    cudaEventDestroy(ready);
    cudaEventDestroy(start);
    cudaEventDestroy(end);
  }
};

class NcclCommunicator;

class NcclWork : public CommWork {
 public:
  NcclWork(NcclCommunicator* c, std::shared_ptr<Events> ev, std::vector<torch::Tensor> keep)
      : comm_(c), ev_(std::move(ev)), keep_(std::move(keep)) {}
  void wait() override;
  double elapsed_ms() override;

 private:
  NcclCommunicator* comm_;
  std::shared_ptr<Events> ev_;
  std::vector<torch::Tensor> keep_;  // alive until the current stream waited for the end
};

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(const DistOptions& o, torch::Device device)
      : rank_(o.rank), world_(o.world_size), dev_(device.index() < 0 ? 0 : device.index()) {
    ncclUniqueId id = parse_id(o.nccl_id_hex);
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(dev_));
    int lo = 0, hi = 0;
    cuda_check(cudaDeviceGetStreamPriorityRange(&lo, &hi), "cudaDeviceGetStreamPriorityRange");
    cuda_check(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, hi), "cudaStreamCreateWithPriority");
    try {
      comm_ = nccl_init_rank(world_, id, rank_, "nccl");
    } catch (...) {
      cudaStreamDestroy(stream_);
      throw;
    }
    abort_id_ = commwatch::on_abort([this] { abort_now("aborted after a communication failure elsewhere on this rank"); });
    watchdog_ = std::thread([this] { watch(); });
  }

  ~NcclCommunicator() override {
    try {
      close();
    } catch (const std::exception&) {
      // cs_destroy called close() first and reported it; here nothing may throw
    }
  }

  // Waits for the last collective under the watchdog (a hung one cannot hang
  // the teardown), stops the watchdog and destroys the communicator. Throws
  // CommError when the last collective or ncclCommDestroy failed.
  void close() override {
    if (closed_) return;
    closed_ = true;
    commwatch::forget(abort_id_);
    std::shared_ptr<Events> last;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (!inflight_.empty()) last = inflight_.back();
    }
    std::string failure;
    if (last) {
      try {
        host_wait(last->end);
      } catch (const std::exception& e) {
        failure = e.what();  // the communicator is aborted
      }
    }
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    watchdog_.join();
    {
      std::lock_guard<std::mutex> lk(comm_mu_);
      if (!aborted_) {
        const ncclResult_t r = nccl_destroy(comm_);
        aborted_ = r != ncclSuccess;  // a failed finalize aborted it
        if (r != ncclSuccess && failure.empty())
          failure = "nccl: ncclCommFinalize/ncclCommDestroy: " +
                    (r == ncclInProgress ? "not done after dist.timeout_ms; communicator aborted" : nccl_text(r));
      }
    }
    cudaStreamDestroy(stream_);
    if (!failure.empty()) throw CommError("closing the communicator: " + failure);
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::string backend() const override { return "nccl"; }
  std::string version() const override {
    int v = 0;
    if (ncclGetVersion(&v) != ncclSuccess) return "unknown";
    int major = v < 10000 ? v / 1000 : v / 10000;
    int minor = v < 10000 ? (v % 1000) / 100 : (v % 10000) / 100;
    char buf[32];
    std::snprintf(buf, sizeof buf, "%d.%d.%d", major, minor, v % 100);
    return buf;
  }

  std::shared_ptr<CommWork> all_reduce_sum(torch::Tensor t) override {
    check(t, "all_reduce");
    return launch("all_reduce", {t}, [&](cudaStream_t s) {
      return ncclAllReduce(t.data_ptr(), t.data_ptr(), t.numel(), nccl_type(t.scalar_type()), ncclSum, comm_, s);
    });
  }

  std::shared_ptr<CommWork> all_gather(torch::Tensor in, torch::Tensor out) override {
    check(in, "all_gather");
    check(out, "all_gather");
    if (out.numel() != in.numel() * world_ || out.scalar_type() != in.scalar_type()) {
      throw CommError("nccl all_gather: output must hold world_size x input elements of its dtype");
    }
    return launch("all_gather", {in, out}, [&](cudaStream_t s) {
      return ncclAllGather(in.data_ptr(), out.data_ptr(), in.numel(), nccl_type(in.scalar_type()), comm_, s);
    });
  }

  std::shared_ptr<CommWork> reduce_scatter_sum(torch::Tensor in, torch::Tensor out) override {
    check(in, "reduce_scatter");
    check(out, "reduce_scatter");
    if (in.numel() != out.numel() * world_ || out.scalar_type() != in.scalar_type()) {
      throw CommError("nccl reduce_scatter: input must hold world_size x output elements of its dtype");
    }
    // in is not kept until wait() (ZeRO-2 drops its bucket buffer at once,
    // dist.h): the comm stream is recorded on its memory in the caching
    // allocator, which then hands the memory out again only after what the
    // stream has queued so far, the reduce-scatter, has run (c10d's
    // recordStream). Memory from another allocator is kept as before.
    const bool cached = caching_allocator(in);
    std::vector<torch::Tensor> keep{out};
    if (!cached) keep.push_back(in);
    auto work = launch("reduce_scatter", std::move(keep), [&](cudaStream_t s) {
      return ncclReduceScatter(in.data_ptr(), out.data_ptr(), out.numel(), nccl_type(out.scalar_type()), ncclSum,
                               comm_, s);
    });
    if (cached)
      c10::cuda::CUDACachingAllocator::recordStream(
          in.storage().data_ptr(), c10::cuda::getStreamFromExternal(stream_, static_cast<c10::DeviceIndex>(dev_)));
    return work;
  }

  void broadcast(torch::Tensor t, int root) override {
    if (!t.is_contiguous()) {  // channels_last weights: through a contiguous copy
      torch::Tensor c = t.contiguous();
      broadcast(c, root);
      torch::NoGradGuard no_grad;
      t.copy_(c);
      return;
    }
    check(t, "broadcast");
    auto w = launch("broadcast", {t}, [&](cudaStream_t s) {
      return ncclBroadcast(t.data_ptr(), t.data_ptr(), t.numel(), nccl_type(t.scalar_type()), root, comm_, s);
    });
    w->wait();
    w->elapsed_ms();  // host-synchronous: returns once done (or throws)
  }

  void send(torch::Tensor t, int peer) override {
    if (!t.is_contiguous()) t = t.contiguous();
    check(t, "send");
    auto w = launch("send", {t}, [&](cudaStream_t s) {
      return ncclSend(t.data_ptr(), t.numel(), nccl_type(t.scalar_type()), peer, comm_, s);
    });
    w->wait();
    w->elapsed_ms();
  }

  void recv(torch::Tensor t, int peer) override {
    if (!t.is_contiguous()) {
      torch::Tensor c = t.contiguous();
      recv(c, peer);
      torch::NoGradGuard no_grad;
      t.copy_(c);
      return;
    }
    check(t, "recv");
    auto w = launch("recv", {t}, [&](cudaStream_t s) {
      return ncclRecv(t.data_ptr(), t.numel(), nccl_type(t.scalar_type()), peer, comm_, s);
    });
    w->wait();
    w->elapsed_ms();
  }

  void barrier() override {
    auto one = torch::ones({1}, torch::TensorOptions().dtype(torch::kFloat).device(torch::kCUDA, dev_));
    auto w = all_reduce_sum(one);
    w->wait();
    w->elapsed_ms();
  }

  // Throws the watchdog's error, if any.
  void throw_if_failed() {
    std::lock_guard<std::mutex> lk(mu_);
    if (!error_.empty()) throw CommError(error_);
  }

  // Blocks the host until ev completes, throwing if the communicator failed.
  void host_wait(cudaEvent_t ev) {
    for (;;) {
      cudaError_t q = cudaEventQuery(ev);
      if (q == cudaSuccess) break;
      if (q != cudaErrorNotReady) cuda_check(q, "cudaEventQuery");
      throw_if_failed();
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    throw_if_failed();  // an aborted collective also completes its events
  }

  int device() const { return dev_; }

#if CS_NCCL_SPLIT
  // nccl_split (nccl_util.h). launch_mu_ keeps every launch out until the
  // split is done; comm_mu_ is held only for ncclCommSplit itself, which
  // returns at once on a non-blocking communicator.
  ncclComm_t split(int color, int key, const std::string& what) {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(dev_));
    std::lock_guard<std::mutex> order(launch_mu_);
    std::shared_ptr<Events> last;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (!inflight_.empty()) last = inflight_.back();
    }
    if (last) host_wait(last->end);  // the world's collectives so far, under the watchdog
    const std::string who = what + ": ncclCommSplit (rank " + std::to_string(rank_) + " of " +
                            std::to_string(world_) + ", color " + std::to_string(color) + ", key " +
                            std::to_string(key) + ")";
    auto fail = [&](const std::string& why) {
      const std::string msg = who + ": " + why;
      commwatch::failed(msg);
      throw CommError(msg);
    };
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // as the world's and every group's (nccl_util.h)
    // On a non-blocking communicator NCCL writes the new communicator into
    // *slot from its init thread when the split completes ("*newcomm should
    // be NCCL_COMM_NULL until comm split fully complete", NCCL's init.cc),
    // possibly after ncclCommSplit and the parent's state have returned: the
    // slot lives on the heap, is polled until it is set, and is left to leak
    // when the split fails, times out or has no color (the thread may still
    // write it).
    // Measured on an H100 (NCCL 2.28.3): a world of one split with color 0
    // returned with the slot still null.
    auto* slot = new ncclComm_t(nullptr);
    ncclResult_t r = ncclSuccess;
    {
      std::lock_guard<std::mutex> lk(comm_mu_);
      throw_if_failed();
      if (aborted_) fail("the communicator was aborted");
      r = ncclCommSplit(comm_, color, key, slot, &config);
    }
    // The parent's part (the exchange of colors and keys over its
    // bootstrap), then, for a color, the child's pointer and its init.
    r = settle(r);
    ncclComm_t child = nullptr;
    if (r == ncclSuccess && color != NCCL_SPLIT_NOCOLOR) {
      r = nccl_settle(
          ncclInProgress,
          [&](ncclResult_t* q) {
            child = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
            if (child == nullptr) {
              *q = ncclInProgress;
              return ncclSuccess;
            }
            return ncclCommGetAsyncError(child, q);
          },
          [&] { return aborted_.load(); });
      if (r == ncclInProgress && child == nullptr) {
        abort_now(who + ": no communicator after dist.timeout_ms=" + std::to_string(commwatch::deadline_ms()) +
                  " (a peer never joined?); communicator aborted");
        throw_if_failed();
      }
    }
    // NCCL's thread also writes the slot (null) for NCCL_SPLIT_NOCOLOR when
    // it finishes, which nothing here waits for: that slot leaks too.
    if (r == ncclSuccess && child != nullptr) delete slot;
    if (r != ncclSuccess && child != nullptr) ncclCommAbort(child);
    if (r == ncclInProgress) {
      abort_now(who + ": not done after dist.timeout_ms=" + std::to_string(commwatch::deadline_ms()) +
                " (a peer never joined?); communicator aborted");
      throw_if_failed();
    }
    if (r != ncclSuccess) fail(aborted_ ? "the communicator was aborted" : nccl_text(r));
    return child;
  }
#endif

 private:
  // t's memory comes from the CUDA caching allocator (recordStream applies).
  static bool caching_allocator(const torch::Tensor& t) {
    const auto* alloc = c10::cuda::CUDACachingAllocator::get();
    return alloc != nullptr && alloc->raw_deleter() != nullptr &&
           t.storage().data_ptr().get_deleter() == alloc->raw_deleter();
  }

  void check(const torch::Tensor& t, const char* what) const {
    if (!t.is_cuda() || t.device().index() != dev_ || !t.is_contiguous()) {
      throw CommError(std::string("nccl ") + what + ": needs a contiguous tensor on cuda:" + std::to_string(dev_));
    }
  }

  // Orders the comm stream after the caller's current stream, issues op
  // between two events and hands the events to the watchdog. launch_mu_
  // keeps launches in order; comm_mu_ guards the handle against the abort
  // and is held only for calls that return at once (non-blocking NCCL), so
  // the watchdog's abort never waits behind a blocked enqueue.
  template <typename Op>
  std::shared_ptr<CommWork> launch(const char* what, std::vector<torch::Tensor> keep, Op op) {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(dev_));
    auto ev = std::make_shared<Events>();
    ev->what = what;
    cudaStream_t cur = c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(dev_)).stream();
    std::lock_guard<std::mutex> order(launch_mu_);
    auto fail = [&](const std::string& why) {
      const std::string msg = std::string("nccl: ") + what + " (rank " + std::to_string(rank_) + "): " + why;
      commwatch::failed(msg);
      throw CommError(msg);
    };
    ncclResult_t r = ncclSuccess;
    {
      std::lock_guard<std::mutex> lk(comm_mu_);
      throw_if_failed();
      if (aborted_) fail("the communicator was aborted");
      cuda_check(cudaEventRecord(ev->ready, cur), "cudaEventRecord");
      cuda_check(cudaStreamWaitEvent(stream_, ev->ready, 0), "cudaStreamWaitEvent");
      cuda_check(cudaEventRecord(ev->start, stream_), "cudaEventRecord");
      r = op(stream_);
    }
    r = settle(r);
    if (r == ncclInProgress) {
      abort_now(std::string("nccl: ") + what + " on rank " + std::to_string(rank_) +
                " not enqueued after dist.timeout_ms=" + std::to_string(commwatch::deadline_ms()) +
                "; communicator aborted");
      throw_if_failed();
    }
    if (r != ncclSuccess) fail(aborted_ ? "the communicator was aborted" : nccl_text(r));
    {
      std::lock_guard<std::mutex> lk(comm_mu_);
      if (aborted_) fail("the communicator was aborted");
      cuda_check(cudaEventRecord(ev->end, stream_), "cudaEventRecord");
    }
    commwatch::issued(what);
    {
      std::lock_guard<std::mutex> lk(mu_);
      ev->issued = std::chrono::steady_clock::now();
      inflight_.push_back(ev);
    }
    cv_.notify_all();
    return std::make_shared<NcclWork>(this, ev, std::move(keep));
  }

  // A call's final result on the world's non-blocking communicator
  // (nccl_settle), its state read under comm_mu_; an abort meanwhile ends the
  // wait with ncclInternalError.
  ncclResult_t settle(ncclResult_t r) {
    return nccl_settle(
        r,
        [&](ncclResult_t* q) {
          std::lock_guard<std::mutex> lk(comm_mu_);
          if (aborted_) {
            *q = ncclInternalError;
            return ncclSuccess;
          }
          return ncclCommGetAsyncError(comm_, q);
        },
        [&] { return aborted_.load(); });
  }

  // Records why (unless an error is already recorded) and aborts the
  // communicator once, without waiting for the device: every later call and
  // every wait throws CommError.
  void abort_now(const std::string& why) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (error_.empty()) error_ = why;
    }
    commwatch::failed(why);
    cv_.notify_all();
    std::lock_guard<std::mutex> cl(comm_mu_);
    if (aborted_) return;
    ncclCommAbort(comm_);
    aborted_ = true;
  }

  // The watchdog: deadline and async errors of outstanding collectives.
  void watch() {
    cudaSetDevice(dev_);
    std::unique_lock<std::mutex> lk(mu_);
    while (!stop_ && error_.empty()) {
      if (inflight_.empty()) {
        cv_.wait(lk, [&] { return stop_ || !inflight_.empty(); });
        continue;
      }
      std::string failure;
      while (!inflight_.empty()) {
        cudaError_t q = cudaEventQuery(inflight_.front()->end);
        if (q == cudaSuccess) {
          inflight_.pop_front();
          commwatch::completed();
          continue;
        }
        auto age = std::chrono::steady_clock::now() - inflight_.front()->issued;
        if (q != cudaErrorNotReady) {
          failure = std::string("nccl: CUDA error while waiting for ") + inflight_.front()->what + ": " +
                    cudaGetErrorString(q);
        } else if (age > std::chrono::milliseconds(commwatch::deadline_ms())) {
          failure = "nccl: " + inflight_.front()->what + " on rank " + std::to_string(rank_) + " of " +
                    std::to_string(world_) + " not finished after dist.timeout_ms=" +
                    std::to_string(commwatch::deadline_ms()) + "; communicator aborted";
        }
        break;
      }
      ncclResult_t async = ncclSuccess;
      bool queried = false;
      if (failure.empty()) {
        // comm_mu_ is never held across a blocking call: this waits at most
        // for an enqueue that returns at once.
        std::unique_lock<std::mutex> cl(comm_mu_, std::try_to_lock);
        if (cl.owns_lock() && !aborted_) queried = ncclCommGetAsyncError(comm_, &async) == ncclSuccess;
      }
      if (queried && async != ncclSuccess
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
          && async != ncclInProgress
#endif
      ) {
        failure = "nccl: asynchronous error on rank " + std::to_string(rank_) + ": " + nccl_text(async);
      }
      if (!failure.empty()) {
        lk.unlock();
        std::fprintf(stderr, "%s\n", failure.c_str());
        abort_now(failure);
        return;
      }
      cv_.wait_for(lk, std::chrono::milliseconds(2));
    }
  }

  int rank_, world_, dev_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::mutex launch_mu_;  // one launch at a time, in issue order
  std::mutex comm_mu_;    // the handle vs. the abort; never held across a blocking call
  std::atomic<bool> aborted_{false};
  bool closed_ = false;
  int abort_id_ = 0;
  std::mutex mu_;  // the fields below
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Events>> inflight_;
  std::string error_;
  bool stop_ = false;
  std::thread watchdog_;
};

void NcclWork::wait() {
  comm_->throw_if_failed();
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(comm_->device()));
  cudaStream_t cur = c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(comm_->device())).stream();
  cuda_check(cudaStreamWaitEvent(cur, ev_->end, 0), "cudaStreamWaitEvent");
  keep_.clear();  // later uses on the current stream are ordered after the collective
}

double NcclWork::elapsed_ms() {
  comm_->host_wait(ev_->end);
  float ms = 0;
  cuda_check(cudaEventElapsedTime(&ms, ev_->start, ev_->end), "cudaEventElapsedTime");
  return ms;
}

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(const DistOptions& opts, torch::Device device) {
  return std::make_unique<NcclCommunicator>(opts, device);
}

std::string nccl_split_unavailable(Communicator& world) {
#if !CS_NCCL_SPLIT
  (void)world;
  return "this engine was built against NCCL " + std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) +
         " headers; ncclCommSplit needs 2.18";
#else
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "ncclGetVersion failed";
  if (v < NCCL_VERSION(2, 18, 0))
    return "the NCCL library loaded is " + std::to_string(v) + " (NCCL_VERSION_CODE); ncclCommSplit needs 2.18";
  if (dynamic_cast<NcclCommunicator*>(&world) == nullptr)
    return "the world communicator is " + world.backend() + ", not make_nccl_communicator's";
  return "";
#endif
}

ncclComm_t nccl_split(Communicator& world, int color, int key, const std::string& what) {
#if !CS_NCCL_SPLIT
  (void)world, (void)color, (void)key;
  throw std::logic_error(what + ": ncclCommSplit needs NCCL 2.18 headers (check nccl_split_unavailable first)");
#else
  auto* c = dynamic_cast<NcclCommunicator*>(&world);
  if (c == nullptr) throw std::logic_error(what + ": ncclCommSplit needs the world's NCCL communicator");
  return c->split(color, key, what);
#endif
}

std::string nccl_unique_id_hex() {
  ncclUniqueId id;
  ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) throw CommError("nccl: ncclGetUniqueId: " + nccl_text(r));
  static const char* digits = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * sizeof(id.internal));
  for (char c : id.internal) {
    auto b = static_cast<unsigned char>(c);
    hex.push_back(digits[b >> 4]);
    hex.push_back(digits[b & 15]);
  }
  return hex;
}

}  // namespace cs
