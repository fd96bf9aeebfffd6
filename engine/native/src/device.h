// device.h: what the trainer needs to know about the device it runs on: names,
// peak FLOP rates, allocator statistics, timing marks and random generators.
// The CUDA parts live behind CS_WITH_CUDA in device.cpp.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config.h"

namespace cs {

// The device the config asks for; UnsupportedError when it is not there.
torch::Device resolve_device(const EngineConfig& cfg);

std::string device_name(const torch::Device& d);

// Dense peak TFLOP/s of a device for a precision (datasheet values, see
// docs/engine.md); 0 when unknown (CPUs, unlisted GPUs).
double table_peak_tflops(const std::string& device_name, Precision p);

struct MemoryStats {
  int64_t allocated = 0, peak = 0, reserved = 0;  // reserved: peak since reset_peak_memory
};
MemoryStats memory_stats(const torch::Device& d);  // zeros on CPU
void reset_peak_memory(const torch::Device& d);

// Waits until all work queued on the device is done.
void synchronize(const torch::Device& d);

// Returns the caching allocator's unused blocks to the device (nothing on CPU).
void empty_cache(const torch::Device& d);

// A generator for d seeded with seed, independent of the global ones.
at::Generator make_generator(const torch::Device& d, uint64_t seed);

// Numbered marks on the device's timeline: CUDA events recorded on the current
// stream on GPUs, the host clock on CPUs. finish() waits for the last mark, after
// which ms(a, b) is the time between two marks.
class Timeline {
 public:
  virtual ~Timeline() = default;
  virtual void mark(int i) = 0;
  virtual void finish(int last) = 0;
  virtual double ms(int a, int b) = 0;
};
std::unique_ptr<Timeline> make_timeline(const torch::Device& d, int marks);

// Whether an exception text is an allocator's out-of-memory message: the CUDA
// caching allocator's, or c10's CPU allocator's ("DefaultCPUAllocator: can't
// allocate memory: ... Error code 12 (Cannot allocate memory)").
bool is_oom_text(const std::string& what);

}  // namespace cs
