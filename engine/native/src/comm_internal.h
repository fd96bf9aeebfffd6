// comm_internal.h: the backends behind make_communicator (comm.cpp). Private to
// comm.cpp, comm_gloo.cpp and comm_nccl.cpp.
#pragma once

#include "dist.h"

namespace cs {

#ifdef CS_WITH_GLOO
std::unique_ptr<Communicator> make_gloo_communicator(const DistOptions& opts);
#endif
#ifdef CS_WITH_NCCL
std::unique_ptr<Communicator> make_nccl_communicator(const DistOptions& opts, torch::Device device);
#endif

}  // namespace cs
