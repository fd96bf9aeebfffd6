// cudnn_tuning.h: how cuDNN picks convolution algorithms (ResNet), switched by
// CASESTUDY_CUDNN_BENCHMARK_LIMIT, read at every cs_create:
//   unset or ""   the default: autotuning (PyTorch's cudnn.benchmark, as the
//                 torchvision reference) trying at most kDefaultCudnnBenchmarkLimit
//                 algorithms per convolution (PyTorch's cudnn.benchmark_limit)
//   N (0..1000)   autotuning trying at most N algorithms; 0: every one
//   off           no autotuning: cuDNN's heuristics pick (cudnn.benchmark False)
// Autotuning runs in the first step that meets each convolution shape (a
// warm-up step) and costs seconds for ResNet-50 (3.6-5.4 s on the H200 at the
// default, 2026-12-02); fewer candidates or none make the first step shorter
// and may make every later step slower: gpu-check.sh's cudnn stage measures both.
#pragma once

#include <string>

namespace cs {

constexpr int kDefaultCudnnBenchmarkLimit = 10;  // PyTorch's default

struct CudnnTuning {
  bool benchmark = true;
  int limit = kDefaultCudnnBenchmarkLimit;  // with benchmark: 0 = every algorithm
};

// Parses a CASESTUDY_CUDNN_BENCHMARK_LIMIT value; std::invalid_argument
// naming the variable and what it takes when the value is bad.
CudnnTuning parse_cudnn_tuning(const std::string& value);

// The setting from the environment (parse_cudnn_tuning).
CudnnTuning cudnn_tuning_from_env();

// Sets libtorch's global context (process-wide, like torch.backends.cudnn).
void apply_cudnn_tuning(const CudnnTuning& t);

// For cs_info: "benchmark, limit 10", "benchmark, every algorithm" or "heuristics".
std::string describe(const CudnnTuning& t);

}  // namespace cs
