// nccl_split_test.cpp: the NCCL groups' ncclCommSplit (nccl_util.h's
// nccl_split, comm_nccl.cpp) on a world of one GPU, the path every NCCL tensor,
// data, pipeline and stage group takes (pipeline_group_nccl.cpp): the world
// communicator from a unique id, split with color 0 (a communicator of one
// rank, rank 0, whose all-reduce works) and with NCCL_SPLIT_NOCOLOR (none);
// the world still works after the splits; the split communicator is destroyed
// before the world. Compiled with NCCL only where the build has it
// (CMakeLists.txt); a build without NCCL says "no NCCL in this build" and
// passes, which scripts/gpu-check.sh counts as a failure on the GPU machine.
#include <torch/torch.h>

#include <iostream>
#include <string>

#include "dist.h"
#include "native_test.h"

#if defined(CS_WITH_NCCL) && defined(CS_WITH_CUDA)
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include "nccl_util.h"
#endif

namespace {

#if defined(CS_WITH_NCCL) && defined(CS_WITH_CUDA)
int split_world_of_one() {
  using namespace cs;
  CS_CHECK(torch::cuda::is_available());
  const torch::Device dev(torch::kCUDA, 0);
  DistOptions o;
  o.rank = 0;
  o.world_size = 1;
  o.backend = "nccl";
  o.nccl_id_hex = nccl_unique_id_hex();
  o.timeout_ms = 60000;
  auto world = make_communicator(o, dev);
  CS_CHECK(world->backend() == "nccl");
  const std::string why = nccl_split_unavailable(*world);
  if (!why.empty()) {
    // The GPU machine's NCCL (PyTorch's) is 2.18 or newer: the groups must split.
    std::cerr << "FAIL nccl_split: unavailable: " << why << " (NCCL " << world->version() << ")\n";
    return 1;
  }
  ncclComm_t child = nccl_split(*world, 0, 0, "nccl_split test");
  if (child == nullptr) {  // CS_CHECK goes on; the calls below would read through it
    std::cerr << "FAIL nccl_split: color 0 gave no communicator\n";
    return 1;
  }
  int n = 0, r = -1;
  CS_CHECK(ncclCommCount(child, &n) == ncclSuccess && n == 1);
  CS_CHECK(ncclCommUserRank(child, &r) == ncclSuccess && r == 0);
  // An all-reduce on the split communicator, on the current stream.
  auto t = torch::arange(1, 5, torch::TensorOptions().dtype(torch::kFloat).device(dev));
  cudaStream_t s = c10::cuda::getCurrentCUDAStream(0).stream();
  ncclResult_t res = nccl_settle(ncclAllReduce(t.data_ptr(), t.data_ptr(), size_t(t.numel()), ncclFloat32, ncclSum, child, s),
                                 [&](ncclResult_t* q) { return ncclCommGetAsyncError(child, q); });
  CS_CHECK(res == ncclSuccess);
  CS_CHECK(cudaStreamSynchronize(s) == cudaSuccess);
  CS_CHECK(torch::equal(t.cpu(), torch::arange(1, 5, torch::kFloat)));
  // No color: no communicator.
  CS_CHECK(nccl_split(*world, NCCL_SPLIT_NOCOLOR, 0, "nccl_split test") == nullptr);
  // The world still reduces after the splits.
  auto w = torch::full({3}, 2.0f, torch::TensorOptions().device(dev));
  world->all_reduce_sum(w)->wait();
  CS_CHECK(torch::equal(w.cpu(), torch::full({3}, 2.0f)));
  // The split communicator before the world (the trainer's order).
  CS_CHECK(nccl_destroy(child) == ncclSuccess);
  world->close();
  std::cout << "  nccl_split: world of one split (NCCL " << world->version() << ")\n";
  return 0;
}
#endif

}  // namespace

int nccl_split_tests() {
#if defined(CS_WITH_NCCL) && defined(CS_WITH_CUDA)
  try {
    return split_world_of_one();
  } catch (const std::exception& e) {
    std::cerr << "FAIL nccl_split: " << e.what() << "\n";
    return 1;
  }
#else
  std::cout << "  nccl_split: no NCCL in this build (nothing checked)\n";
  return 0;
#endif
}
