// device.cpp: device facts, allocator statistics, timing marks, generators.
#include "device.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cstring>

#ifdef CS_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace cs {

torch::Device resolve_device(const EngineConfig& cfg) {
  if (cfg.device == "cpu") return torch::Device(torch::kCPU);
#ifdef CS_WITH_CUDA
  if (!torch::cuda::is_available())
    throw UnsupportedError("device cuda: no CUDA device is visible to this process");
  const int n = int(torch::cuda::device_count());
  if (cfg.device_index >= n)
    throw UnsupportedError("device_index " + std::to_string(cfg.device_index) + ": only " +
                           std::to_string(n) + " CUDA device(s) visible");
  return torch::Device(torch::kCUDA, c10::DeviceIndex(cfg.device_index));
#else
  throw UnsupportedError("device cuda: this engine was built against a libtorch without CUDA (" +
                         std::string("rebuild it against a CUDA torch to use GPUs)"));
#endif
}

std::string device_name(const torch::Device& d) {
#ifdef CS_WITH_CUDA
  if (d.is_cuda()) return at::cuda::getDeviceProperties(d.index())->name;
#endif
  return "cpu";
}

double table_peak_tflops(const std::string& name, Precision p) {
  // Dense (no sparsity) datasheet peaks: {bf16/fp16, tf32, fp32}. More specific
  // names first: "H100 PCIe" before "H100".
  struct Peak {
    const char* match;
    double half, tf32, fp32;
  };
  static const Peak table[] = {
      {"H200", 989.4, 494.7, 66.9},      // H200 SXM
      {"H100 PCIe", 756.4, 378.0, 51.2},  // H100 PCIe
      {"H100 NVL", 835.5, 417.5, 60.0},   // H100 NVL
      {"H100", 989.4, 494.7, 66.9},       // H100 SXM
      {"A100", 312.0, 156.0, 19.5},       // A100 SXM/PCIe
  };
  for (const auto& e : table) {
    if (name.find(e.match) == std::string::npos) continue;
    switch (p) {
      case Precision::BF16:
      case Precision::FP16:
      // fp8: against the bf16 peak, so that MFU compares across precisions
      // (only the linear layers run FP8; its dense peak is twice bf16's).
      case Precision::FP8: return e.half;
      case Precision::TF32: return e.tf32;
      case Precision::FP32: return e.fp32;
    }
  }
  return 0;
}

MemoryStats memory_stats(const torch::Device& d) {
  MemoryStats m;
#ifdef CS_WITH_CUDA
  if (d.is_cuda()) {
    auto s = c10::cuda::CUDACachingAllocator::getDeviceStats(d.index());
    // Index 0 is StatType::AGGREGATE (all pools).
    m.allocated = s.allocated_bytes[0].current;
    m.peak = s.allocated_bytes[0].peak;
    m.reserved = s.reserved_bytes[0].peak;  // since reset_peak_memory, as peak
  }
#endif
  return m;
}

void reset_peak_memory(const torch::Device& d) {
#ifdef CS_WITH_CUDA
  if (d.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(d.index());
#endif
}

void synchronize(const torch::Device& d) {
#ifdef CS_WITH_CUDA
  if (d.is_cuda()) c10::cuda::device_synchronize();
#endif
}

void empty_cache(const torch::Device& d) {
#ifdef CS_WITH_CUDA
  if (d.is_cuda()) c10::cuda::CUDACachingAllocator::emptyCache();
#endif
}

at::Generator make_generator(const torch::Device& d, uint64_t seed) {
  at::Generator g;
  if (d.is_cpu()) {
    g = at::detail::createCPUGenerator(seed);
  } else {
    auto def = at::globalContext().defaultGenerator(d);
    std::lock_guard<std::mutex> lock(def.mutex());
    g = def.clone();
  }
  std::lock_guard<std::mutex> lock(g.mutex());
  g.set_current_seed(seed);
  return g;
}

namespace {

class HostTimeline : public Timeline {
 public:
  explicit HostTimeline(int n) : t_(n) {}
  void mark(int i) override { t_.at(i) = std::chrono::steady_clock::now(); }
  void finish(int) override {}
  double ms(int a, int b) override {
    return std::chrono::duration<double, std::milli>(t_.at(b) - t_.at(a)).count();
  }

 private:
  std::vector<std::chrono::steady_clock::time_point> t_;
};

#ifdef CS_WITH_CUDA
class CudaTimeline : public Timeline {
 public:
  explicit CudaTimeline(int n) {
    for (int i = 0; i < n; i++) ev_.emplace_back(new at::cuda::CUDAEvent(cudaEventDefault));
  }
  void mark(int i) override { ev_.at(i)->record(); }
  void finish(int last) override { ev_.at(last)->synchronize(); }
  double ms(int a, int b) override { return ev_.at(a)->elapsed_time(*ev_.at(b)); }

 private:
  std::vector<std::unique_ptr<at::cuda::CUDAEvent>> ev_;
};
#endif

}  // namespace

std::unique_ptr<Timeline> make_timeline(const torch::Device& d, int marks) {
#ifdef CS_WITH_CUDA
  if (d.is_cuda()) return std::make_unique<CudaTimeline>(marks);
#endif
  return std::make_unique<HostTimeline>(marks);
}

bool is_oom_text(const std::string& what) {
  for (const char* text : {"out of memory", "not enough memory", "can't allocate memory",
                           "Cannot allocate memory"})
    if (what.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace cs
