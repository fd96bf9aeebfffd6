// main.cpp: the engine's C++ unit tests, for code the C ABI cannot reach
// directly or that needs exact comparisons against libtorch's own ops. On a
// machine with CUDA they run on the GPU too. Exit status 0 when all pass.
//   make engine-tests   (cmake --build build/engine --target cs_native_tests)
//   cs_native_tests [SUITE...]   only these suites (each kernel's suite apart:
//                                a crashed kernel leaves the others' verdicts)
#include <cstring>
#include <iostream>

#include "native_test.h"

int row_random_tests();  // row_random_test.cpp
int checkpoint_tests();  // checkpoint_test.cpp
int tppp_tests();        // tppp_test.cpp
int nccl_split_tests();  // nccl_split_test.cpp
int shadow_tests();      // shadow_test.cpp
int zero_tests();        // zero_test.cpp
int resnet_fusion_tests();  // resnet_fusion_test.cpp

int main(int argc, char** argv) {
  int failed = 0, ran = 0;
  for (auto [name, fn] : {std::pair{"optim", optim_tests}, {"kernels", kernels_tests},
                          {"linear_ce", linear_ce_tests}, {"add_layer_norm", add_layer_norm_tests},
                          {"bn_relu", bn_relu_tests}, {"max_pool", max_pool_tests},
                          {"linear_act", linear_act_tests}, {"linear_qkv", linear_qkv_tests},
                          {"profile_spans", profile_spans_tests},
                          {"checksum", checksum_tests}, {"stem_conv", stem_conv_tests},
                          {"linear_casts", linear_casts_tests}, {"adamw", adamw_tests},
                          {"adamc", adamc_tests},
                          {"reducer", reducer_tests}, {"tp", tp_tests},
                          {"fp8_linear", fp8_linear_tests}, {"fp8_cast", fp8_cast_tests},
                          {"row_random", row_random_tests}, {"checkpoint", checkpoint_tests},
                          {"tppp", tppp_tests}, {"nccl_split", nccl_split_tests},
                          {"shadow", shadow_tests}, {"zero", zero_tests},
                          {"resnet_fusion", resnet_fusion_tests}}) {
    bool wanted = argc < 2;
    for (int i = 1; i < argc; i++) wanted |= std::strcmp(argv[i], name) == 0;
    if (!wanted) continue;
    const int rc = fn();
    std::cout << (rc == 0 ? "ok   " : "FAIL ") << name << std::endl;
    failed += rc != 0;
    ran++;
  }
  if (ran == 0) {
    std::cerr << "cs_native_tests: no suite named " << argv[1] << "\n";
    return 2;
  }
  return failed == 0 ? 0 : 1;
}
