// native_test.h: the check macro of the engine's C++ unit tests (tests/main.cpp).
#pragma once

#include <torch/torch.h>

#include <exception>
#include <iostream>
#include <string>

#include "kernels.h"

// CS_CHECK(cond): on failure prints the condition and line and returns 1 from the
// enclosing test function.
#define CS_CHECK(c)                                                    \
  do {                                                              \
    if (!(c)) {                                                     \
      std::cerr << "FAIL " #c " (" << __FILE__ << ":" << __LINE__ << ")\n"; \
      return 1;                                                     \
    }                                                               \
  } while (0)

// ||a - b|| / ||b|| in float64: the relative error the kernel tests compare.
inline double rel_err(const torch::Tensor& a, const torch::Tensor& b) {
  auto af = a.to(torch::kFloat64), bf = b.to(torch::kFloat64);
  return ((af - bf).norm() / bf.norm().clamp_min(1e-30)).item<double>();
}

// Runs one case's check (a callable returning 0 when it passes), an exception
// counting as a failure printed with the suite's name; a failed case is named.
template <typename Check>
int run_case(const char* suite, const std::string& what, Check&& check) {
  int rc = 1;
  try {
    rc = check();
  } catch (const std::exception& e) {
    std::cerr << "FAIL " << suite << ": " << e.what() << "\n";
  }
  if (rc) std::cerr << "  case " << what << "\n";
  return rc;
}

// Whether a suite's CUDA cases can run (a CUDA device and the kernels built);
// where not, says why on a line of its own ("  SUITE cuda: not run (...)").
inline bool cuda_cases_run(const char* suite) {
  if (torch::cuda::is_available() && cs::kernels::compiled()) return true;
  std::cout << "  " << suite << " cuda: not run ("
            << (cs::kernels::compiled() ? "no CUDA device" : "no CUDA kernels in this build") << ")\n";
  return false;
}

// While it lives, the kernels' host versions run on CPU tensors
// (kernels::set_host_for_tests(on)); they are off again when it ends, however
// the test returns.
struct HostKernels {
  explicit HostKernels(bool on = true) { cs::kernels::set_host_for_tests(on); }
  ~HostKernels() { cs::kernels::set_host_for_tests(false); }
  HostKernels(const HostKernels&) = delete;
  HostKernels& operator=(const HostKernels&) = delete;
};

int optim_tests();
int linear_ce_tests();
int profile_spans_tests();
int kernels_tests();
int add_layer_norm_tests();
int bn_relu_tests();
int max_pool_tests();
int linear_act_tests();
int linear_qkv_tests();
int checksum_tests();
int stem_conv_tests();
int linear_casts_tests();
int adamc_tests();  // adamc_test.cpp
int adamw_tests();
int reducer_tests();
int tp_tests();
int fp8_linear_tests();
int fp8_cast_tests();
