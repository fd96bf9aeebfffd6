// main.cpp: the engine's C++ unit tests, for code the C ABI cannot reach
// directly or that needs exact comparisons against libtorch's own ops. On a
// machine with CUDA they run on the GPU too. Exit status 0 when all pass.
//   make engine-tests   (cmake --build build/engine --target cs_native_tests)
#include <iostream>

#include "native_test.h"

int main() {
  int failed = 0;
  for (auto [name, fn] : {std::pair{"optim", optim_tests}, {"linear_ce", linear_ce_tests},
                           {"profile_spans", profile_spans_tests}}) {
    const int rc = fn();
    std::cout << (rc == 0 ? "ok   " : "FAIL ") << name << "\n";
    failed += rc != 0;
  }
  return failed == 0 ? 0 : 1;
}
