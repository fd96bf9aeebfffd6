// comm_internal.h: the backends behind make_communicator (comm.cpp). Private to
// comm.cpp, comm_gloo.cpp, comm_nccl.cpp and comm_staged.cpp.
#pragma once

#include "dist.h"

namespace cs {

#ifdef CS_WITH_GLOO
std::unique_ptr<Communicator> make_gloo_communicator(const DistOptions& opts);
#endif
// The host-staged backend (comm_staged.cpp) around a CPU communicator: tensors
// are copied to (pinned) host buffers, reduced there and copied back, on a
// communication stream ordered by events as on NCCL. backend() is "gloo-staged".
std::unique_ptr<Communicator> make_staged_communicator(std::unique_ptr<Communicator> host,
                                                       torch::Device device, int timeout_ms);
#ifdef CS_WITH_NCCL
std::unique_ptr<Communicator> make_nccl_communicator(const DistOptions& opts, torch::Device device);
#endif

}  // namespace cs
