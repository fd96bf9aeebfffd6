// interfere.cpp: the κ calibration's load (interfere.h, docs/predict.md).
#include "interfere.h"

#include <atomic>
#include <chrono>
#include <deque>
#include <limits>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#ifdef CS_WITH_KERNELS
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include "cuda/kernels_cuda.h"
#endif

namespace cs {
namespace {

constexpr const char* kEnv = "CASESTUDY_INTERFERE";
constexpr int64_t kBytes = 128ll << 20;  // each buffer: well past a CPU's or an H100's last-level cache

// CPU ranks: `threads` threads copy between two buffers while a backward
// runs, paced to gbps GB/s in all (read + written; 0: unpaced).
class HostInterference : public Interference {
 public:
  HostInterference(int threads, double gbps) : gbps_(gbps) {
    // The buffers are written here, before the first backward: a page's first
    // touch is not part of the load.
    const size_t n = size_t(kBytes) / size_t(threads) + kChunk;
    for (int i = 0; i < threads; i++) buffers_.emplace_back(std::vector<char>(n, 1), std::vector<char>(n, 0));
    for (int i = 0; i < threads; i++) workers_.emplace_back([this, i, threads] { run(i, threads); });
  }
  ~HostInterference() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      quit_ = true;
      on_ = false;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
  }
  void begin() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      on_ = true;
    }
    cv_.notify_all();
  }
  void end() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      on_ = false;
    }
    passes_.push_back(bytes_.exchange(0));
  }
  double take_gbps(double ms, int n) override {
    double b = 0;
    for (; n > 0 && !passes_.empty(); n--) {
      b += double(passes_.front());
      passes_.pop_front();
    }
    return ms > 0 ? b / (ms * 1e6) : 0.0;
  }

 private:
  void run(int i, int threads) {
    const size_t chunk = kChunk;
    std::vector<char>& src = buffers_[size_t(i)].first;
    std::vector<char>& dst = buffers_[size_t(i)].second;
    const double per_ns = gbps_ / threads;  // GB/s is bytes per ns
    for (;;) {
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [this] { return on_ || quit_; });
        if (quit_) return;
      }
      const auto t0 = std::chrono::steady_clock::now();
      uint64_t moved = 0;
      for (size_t off = 0;; off = (off + chunk) % (src.size() - chunk)) {
        {
          std::lock_guard<std::mutex> l(mu_);
          if (!on_ || quit_) break;
        }
        std::memcpy(dst.data() + off, src.data() + off, chunk);
        moved += 2 * chunk;
        bytes_ += 2 * chunk;
        if (per_ns > 0) {
          const double ahead = double(moved) / per_ns -
                               std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
          if (ahead > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(int64_t(ahead)));
        }
      }
    }
  }
  const double gbps_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool on_ = false, quit_ = false;
  std::atomic<uint64_t> bytes_{0};
  std::deque<uint64_t> passes_;  // bytes of each backward pass not taken yet
  static constexpr size_t kChunk = 1 << 20;
  std::vector<std::pair<std::vector<char>, std::vector<char>>> buffers_;  // each thread's source and destination
  std::vector<std::thread> workers_;
};

#ifdef CS_WITH_KERNELS
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(kEnv) + ": " + what + ": " + cudaGetErrorString(e));
}

// A GPU: the copy kernel on a side stream, started in stream order when the
// backward starts (the side stream waits on an event of the compute stream)
// and stopped in stream order when it ends (the compute stream raises the
// flag the kernel polls to the pass's epoch: it only grows, so a kernel that
// starts late still stops, and an early stop never ends a later pass).
class DeviceInterference : public Interference {
 public:
  DeviceInterference(torch::Device device, int blocks, double gbps)
      : device_(device), blocks_(blocks), gbps_(gbps), side_(c10::cuda::getStreamFromPool(false, device.index())) {
    c10::cuda::CUDAGuard guard(device);
    int sms = 0;
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device.index()), "multiprocessors");
    if (blocks >= sms)
      throw std::runtime_error(std::string(kEnv) + ": " + std::to_string(blocks) + " blocks leave none of the " +
                               std::to_string(sms) + " multiprocessors to the backward pass");
    auto u8 = torch::TensorOptions().dtype(torch::kUInt8).device(device);
    src_ = torch::ones({kBytes}, u8);
    dst_ = torch::empty({kBytes}, u8);
    flag_ = torch::zeros({1}, torch::TensorOptions().dtype(torch::kInt32).device(device));
    copied_ = torch::zeros({kSlots + 1}, torch::TensorOptions().dtype(torch::kInt64).device(device));
    check(cudaEventCreateWithFlags(&start_, cudaEventDisableTiming), "event");
  }
  ~DeviceInterference() override {
    // A backward that threw never stopped its kernel: stop every one, and wait.
    try {
      c10::cuda::CUDAGuard guard(device_);
      flag_.fill_(int64_t(std::numeric_limits<int>::max()));
      cudaStreamSynchronize(side_.stream());
    } catch (...) {
    }
    cudaEventDestroy(start_);
  }
  void begin() override {
    // The first passes run without the load: CUDA loads a kernel's module at
    // its first launch (lazy loading, CUDA_MODULE_LOADING=LAZY, the default),
    // and that may wait for the whole device, so a backward meeting new kernels
    // waits for the load that waits for it (the 2 s deadline below breaks it).
    // Warm-up steps load them; the runner discards those steps.
    c10::cuda::CUDAGuard guard(device_);
    cudaStream_t compute = c10::cuda::getCurrentCUDAStream(device_.index()).stream();
    check(cudaEventRecord(start_, compute), "event record");
    check(cudaStreamWaitEvent(side_.stream(), start_, 0), "stream wait");
    if (begun_ - taken_ >= kSlots)
      throw std::runtime_error(std::string(kEnv) + ": more than " + std::to_string(kSlots) + " backward passes not reported");
    auto* slot = reinterpret_cast<unsigned long long*>(copied_.data_ptr<int64_t>() + begun_++ % kSlots);
    check(cudaMemsetAsync(slot, 0, sizeof(*slot), side_.stream()), "counter");
    if (quiet_ > 0) {  // a pass without the load still takes its (zero) slot: metrics read passes in order
      quiet_--;
      return;
    }
    check(cs::cuda::interfere_copy(src_.data_ptr(), dst_.data_ptr(), kBytes, blocks_, gbps_,
                                   static_cast<const int*>(flag_.data_ptr()), int(begun_), slot, kMaxNs,
                                   timeouts_ptr(), side_.stream()),
          "copy kernel");
  }
  void end() override {
    c10::cuda::CUDAGuard guard(device_);
    flag_.fill_(int64_t(begun_));  // on the current (compute) stream, after the backward
  }
  double take_gbps(double ms, int n) override {
    c10::cuda::CUDAGuard guard(device_);
    check(cudaStreamSynchronize(side_.stream()), "side stream");
    double b = 0;
    for (; n > 0 && taken_ < begun_; n--) {
      int64_t v = 0;
      check(cudaMemcpy(&v, copied_.data_ptr<int64_t>() + taken_++ % kSlots, sizeof(v), cudaMemcpyDeviceToHost), "counter");
      b += double(v);
    }
    // The deadline counter, read after the same synchronisation.
    check(cudaMemcpy(&timeouts_, timeouts_ptr(), sizeof(timeouts_), cudaMemcpyDeviceToHost), "timeouts");
    return ms > 0 ? b / (ms * 1e6) : 0.0;
  }
  int64_t timeouts() override { return timeouts_; }

 private:
  // The last of copied_'s slots counts the blocks that stopped at kMaxNs.
  unsigned long long* timeouts_ptr() {
    return reinterpret_cast<unsigned long long*>(copied_.data_ptr<int64_t>() + kSlots);
  }
  static constexpr uint64_t kMaxNs = 2'000'000'000;  // 2 s: far above any backward pass studied
  torch::Device device_;
  int blocks_;
  double gbps_;
  c10::cuda::CUDAStream side_;
  static constexpr int64_t kSlots = 4096;  // a counter per backward pass issued and not reported
  torch::Tensor src_, dst_, flag_, copied_;
  int64_t begun_ = 0, taken_ = 0, timeouts_ = 0;
  int quiet_ = 3;  // backward passes left to run without the load
  cudaEvent_t start_ = nullptr;
};
#endif

}  // namespace

std::unique_ptr<Interference> Interference::from_env(torch::Device device,
                                                    const std::function<void(int)>& check_shadow) {
  const char* v = std::getenv(kEnv);
  if (!v || !*v) return nullptr;
  const std::string s(v);
  if (s.rfind("gloo:", 0) == 0) {  // the stretch calibration (shadow_gloo.cpp)
    size_t used = 0;
    int n = 0;
    try {
      n = std::stoi(s.substr(5), &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || 5 + used != s.size() || n < 2)
      throw std::runtime_error(std::string(kEnv) + "=" + s + ": give gloo:N (N ranks, 2 or more)");
    if (device.is_cuda()) throw std::runtime_error(std::string(kEnv) + "=" + s + ": CPU ranks only (a Gloo group)");
    if (check_shadow) check_shadow(n);
    return make_shadow_interference(n);
  }
  const std::string bad = std::string(kEnv) + "=" + s + ": give C or C:B (C blocks on a GPU / threads on CPU ranks, at least 1; B GB/s, 0 or more)";
  size_t used = 0;
  int c = 0;
  double gbps = 0;
  try {
    c = std::stoi(s, &used);
    if (used < s.size()) {
      if (s[used] != ':') throw std::invalid_argument("");
      size_t more = 0;
      gbps = std::stod(s.substr(used + 1), &more);
      if (used + 1 + more != s.size()) throw std::invalid_argument("");
    }
  } catch (const std::exception&) {
    throw std::runtime_error(bad);
  }
  if (c < 1 || !(gbps >= 0)) throw std::runtime_error(bad);
  if (device.is_cuda()) {
#ifdef CS_WITH_KERNELS
    return std::make_unique<DeviceInterference>(device, c, gbps);
#else
    throw std::runtime_error(std::string(kEnv) + ": this engine was built without its CUDA kernels (no nvcc)");
#endif
  }
  return std::make_unique<HostInterference>(c, gbps);
}

}  // namespace cs
