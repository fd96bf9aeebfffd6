// pipeline_group.h: the communicators of pipeline parallelism. Ranks are laid
// out replica-major: rank = dp_rank * stages + stage, so a replica's stages are
// consecutive ranks (neighbouring GPUs of one host). Each rank joins
//   - its pipeline group (the S stages of its replica): activations and their
//     gradients between neighbours, tied-weight gradients, loss and grad norm;
//   - its stage group (the DP replicas of its stage): the gradient all-reduce.
// Gloo (CPU): one GlooGroup (gloo_group.h) per group over a PrefixStore on the trial's
// TCPStore (rank 0 of the trial communicator serves it). NCCL (GPU): each
// group's communicator split from the trial communicator's (ncclCommSplit,
// NCCL 2.18 and newer: comm_nccl.cpp's nccl_split, nccl_util.h; color the
// group's index in its partition, key the rank's place in it); with older
// NCCL one communicator per group from a unique id rank 0 makes and broadcasts
// over the trial communicator, the reason logged. The trainer closes the
// groups before the trial communicator.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <vector>

#include "dist.h"

namespace cs {

// One send or receive of a batch; t is contiguous on the group's device.
struct P2POp {
  bool send = false;
  torch::Tensor t;
  int peer = 0;  // rank in the group
  int tag = 0;   // Gloo matches on it; NCCL matches in issue order per peer
};

class PipeGroup {
 public:
  virtual ~PipeGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Posts every op, then waits for all of them (Megatron's batch_isend_irecv),
  // so two neighbours may send to each other in one call without deadlock.
  virtual void exchange(const std::vector<P2POp>& ops) = 0;
  // Sums t (contiguous; float32, float64 or bfloat16) in place over the group;
  // returns when done.
  virtual void all_reduce_sum(torch::Tensor t) = 0;
  // Gathers every rank's in (contiguous, n elements, the same n and dtype on
  // every rank, any dtype) into out (contiguous, size() * n elements of in's
  // dtype): rank r's in lands at elements [r*n, (r+1)*n). Exact (the bytes are
  // copied); returns when done.
  virtual void all_gather(const torch::Tensor& in, torch::Tensor out) = 0;
  // Sums in (contiguous, size() * n elements; float32, float64 or bfloat16)
  // over the group and writes this rank's block of the sum, elements
  // [rank()*n, (rank()+1)*n), into out (contiguous, n elements of in's dtype);
  // returns when done.
  virtual void reduce_scatter_sum(const torch::Tensor& in, torch::Tensor out) = 0;
  // Orderly teardown, as Communicator::close (dist.h).
  virtual void close() {}
};

// The gradients' average over g (a data-parallel group) in one all-reduce:
// grads flattened into one buffer (torch::cat, whose dtype is their promoted
// one), summed over g, divided by g.size() and copied back. The pipeline's
// stage group and the tensor mesh's data group use it. before and after (may
// be empty) run just before and after the collective, for the caller's timing.
// Returns the buffer's bytes; nothing (0) when grads is empty.
int64_t average_over_group(const std::vector<torch::Tensor>& grads, PipeGroup& g,
                           const std::function<void()>& before = nullptr,
                           const std::function<void()>& after = nullptr);

// Sums each of ts over g in place with one all-reduce per dtype instead of one
// per tensor (Megatron's _allreduce_layernorm_grads): the tensors of a dtype
// flattened into one buffer, summed, copied back. Returns the all-reduces made.
int coalesced_all_reduce_sum(const std::vector<torch::Tensor>& ts, PipeGroup& g);

// A partition of the trial's ranks into groups (every rank in exactly one).
using Partition = std::vector<std::vector<int>>;

// For each partition, this rank's group (nullptr where its group has one rank).
// Every rank of the trial calls it with the same partitions, in the same order.
std::vector<std::unique_ptr<PipeGroup>> make_pipe_groups(const DistOptions& dist,
                                                         torch::Device device,
                                                         Communicator& world,
                                                         const std::vector<Partition>& parts);

#ifdef CS_WITH_GLOO
std::vector<std::unique_ptr<PipeGroup>> make_gloo_pipe_groups(const DistOptions& dist,
                                                              const std::vector<Partition>& parts);
#endif
#ifdef CS_WITH_NCCL
std::vector<std::unique_ptr<PipeGroup>> make_nccl_pipe_groups(const DistOptions& dist,
                                                              torch::Device device,
                                                              Communicator& world,
                                                              const std::vector<Partition>& parts);
#endif

}  // namespace cs
