// dist.h: the trainer's view of multi-rank training. A Communicator hides NCCL
// (comm_nccl.cpp) or Gloo through c10d (comm_gloo.cpp); the GradReducer
// (reducer.cpp) buckets gradients DDP-style on top of any Communicator.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cs {

// Where this rank sits (engine config "dist").
struct DistOptions {
  int rank = 0;
  int world_size = 1;
  std::string backend;      // nccl | gloo | "" (by device)
  std::string store_addr;   // gloo: c10d TCPStore host, rank 0 serves it
  int store_port = 0;
  std::string nccl_id_hex;  // nccl: unique id from rank 0
  int timeout_ms = 600000;  // a collective not done by then is an error (CS_ERR_COMM)
};

// Thrown when a collective fails or times out: becomes CS_ERR_COMM at the ABI.
struct CommError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// An outstanding collective.
class CommWork {
 public:
  virtual ~CommWork() = default;
  // Blocks the host until done (CPU) or makes the compute stream wait for it (GPU).
  virtual void wait() = 0;
  // Milliseconds the collective took on the communication stream (after wait()).
  virtual double elapsed_ms() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string backend() const = 0;  // "nccl" | "gloo"
  virtual std::string version() const = 0;  // NCCL version, or "gloo"
  // Sums t in place across ranks, asynchronously (GPU: on the communication stream,
  // ordered after the work queued so far on the current stream).
  virtual std::shared_ptr<CommWork> all_reduce_sum(torch::Tensor t) = 0;
  virtual void broadcast(torch::Tensor t, int root) = 0;  // synchronous
  virtual void send(torch::Tensor t, int peer) = 0;       // point-to-point (pipeline)
  virtual void recv(torch::Tensor t, int peer) = 0;
  virtual void barrier() = 0;
};

std::unique_ptr<Communicator> make_communicator(const DistOptions& opts, torch::Device device);

// DDP reducer options (engine config "ddp").
struct DDPOptions {
  double bucket_mb = 25;
  double first_bucket_mb = 1;
  bool overlap = true;
  std::string compression = "none";  // none | fp16 | bf16 | topk
  double topk_ratio = 0.01;
};

struct BucketStat {
  int64_t bytes = 0;  // bytes on the wire
  double ms = 0;
};

// What the reducer did in the last step.
struct ReducerStats {
  double comm_ms = 0;          // sum of collective times on the comm stream
  double exposed_comm_ms = 0;  // time the step waited for communication after backward
  int64_t comm_bytes = 0;
  int collectives = 0;
  std::vector<BucketStat> buckets;
};

class GradReducer {
 public:
  virtual ~GradReducer() = default;
  // Before the backward of each micro-batch; communicate is true only for the
  // last micro-batch of a step (grad_accum > 1 accumulates locally first).
  virtual void prepare(bool communicate) = 0;
  // After the last backward: launches what is left, waits, averages over ranks and
  // leaves the averaged gradients in each parameter's .grad().
  virtual void finalize() = 0;
  virtual ReducerStats stats() const = 0;
};

// params in registration order (model->parameters()); hooks are registered here.
std::unique_ptr<GradReducer> make_reducer(const std::vector<torch::Tensor>& params,
                                          Communicator& comm, const DDPOptions& opts);

}  // namespace cs
