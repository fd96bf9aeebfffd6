// cudnn_tuning.cpp: see cudnn_tuning.h.
#include "cudnn_tuning.h"

#include <ATen/Context.h>

#include <cstdlib>
#include <stdexcept>

namespace cs {

CudnnTuning parse_cudnn_tuning(const std::string& value) {
  const auto b = value.find_first_not_of(" \t"), e = value.find_last_not_of(" \t");
  const std::string v = b == std::string::npos ? "" : value.substr(b, e - b + 1);
  CudnnTuning t;
  if (v.empty()) return t;
  if (v == "off") {
    t.benchmark = false;
    return t;
  }
  const bool digits = v.size() <= 4 && v.find_first_not_of("0123456789") == std::string::npos;
  if (!digits || std::stoi(v) > 1000)
    throw std::invalid_argument("CASESTUDY_CUDNN_BENCHMARK_LIMIT=" + value +
                                ": want a whole number 0..1000 (the most convolution algorithms "
                                "cuDNN autotuning tries; 0: every one) or off (no autotuning)");
  t.limit = std::stoi(v);
  return t;
}

CudnnTuning cudnn_tuning_from_env() {
  const char* v = std::getenv("CASESTUDY_CUDNN_BENCHMARK_LIMIT");
  return parse_cudnn_tuning(v ? v : "");
}

void apply_cudnn_tuning(const CudnnTuning& t) {
  at::globalContext().setBenchmarkCuDNN(t.benchmark);
  if (t.benchmark) at::globalContext().setBenchmarkLimitCuDNN(t.limit);
}

std::string describe(const CudnnTuning& t) {
  if (!t.benchmark) return "heuristics";
  if (t.limit == 0) return "benchmark, every algorithm";
  return "benchmark, limit " + std::to_string(t.limit);
}

}  // namespace cs
