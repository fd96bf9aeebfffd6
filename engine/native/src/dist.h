// dist.h: the trainer's view of multi-rank training. A Communicator hides NCCL
// (comm_nccl.cpp) or Gloo through c10d (comm_gloo.cpp); the GradReducer
// (reducer.cpp) buckets gradients DDP-style on top of any Communicator.
#pragma once

#include <torch/torch.h>

#include <nlohmann/json.hpp>

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
  std::string store_addr;   // gloo: the store's host (gloo_store.h)
  int store_port = 0;
  std::string store_token;  // gloo: the trial's token: the store is the runner's rendezvous
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
  // Gathers in (contiguous) from every rank into out (contiguous, world_size *
  // in.numel() elements of in's dtype, rank r's block at r * in.numel()); async
  // like all_reduce_sum. Used by top-k compression.
  virtual std::shared_ptr<CommWork> all_gather(torch::Tensor in, torch::Tensor out) = 0;
  // Sums in (contiguous, world_size * out.numel() elements) across ranks and
  // leaves block rank() of the sum in out; async like all_reduce_sum. in's
  // contents are unspecified afterwards. Used by ZeRO-2 (zero.h), which drops
  // its own reference to in at once: a backend holds in only as long as the
  // collective reads it, never until wait(), so the buckets of a backward are
  // not all alive at its end. NCCL runs ncclReduceScatter and records its
  // stream on in's memory in the caching allocator (as c10d does); the
  // host-staged backend copies in to the host when called and the device
  // memory is free once that copy is done; Gloo (libtorch 1.13's
  // ProcessGroupGloo has no reduce_scatter) all-reduces in on its thread and
  // copies the block out there, releasing in as the job ends: the same sum,
  // twice the traffic of a ring reduce-scatter. The default (any other
  // backend) all-reduces in and copies the block at wait(), holding in until then.
  virtual std::shared_ptr<CommWork> reduce_scatter_sum(torch::Tensor in, torch::Tensor out);
  // Bytes t occupies on the wire (Gloo sends bf16 as fp32).
  virtual int64_t wire_bytes(const torch::Tensor& t) const {
    return t.numel() * static_cast<int64_t>(t.element_size());
  }
  virtual void broadcast(torch::Tensor t, int root) = 0;  // synchronous
  virtual void send(torch::Tensor t, int peer) = 0;       // point-to-point (pipeline)
  virtual void recv(torch::Tensor t, int peer) = 0;
  virtual void barrier() = 0;
  // Orderly teardown (cs_destroy): waits for what is in flight and releases the
  // backend, throwing CommError when that fails. The destructor does the same
  // quietly when close() was not called.
  virtual void close() {}
};

// Backend "" picks nccl for a CUDA device and gloo for the CPU. Throws
// UnsupportedError (model.h) for a backend this build lacks.
std::unique_ptr<Communicator> make_communicator(const DistOptions& opts, torch::Device device);

// A new NCCL unique id as 256 hex characters (cs_nccl_unique_id in capi.cpp calls
// it; comm_nccl.cpp defines it). Throws UnsupportedError in a build without NCCL.
std::string nccl_unique_id_hex();

// The all-reduce microbenchmark of cs_bench_allreduce (bench_comm.cpp; the
// header documents its JSON in and out).
nlohmann::json bench_allreduce(const char* config_json);

// ZeRO optimizer-state sharding (engine config "zero"; zero.h).
struct ZeroOptions {
  int stage = 0;  // 0: none (DDP); 1: optimizer states; 2: and gradients
  // The step's all-gathers overlap the next forward (each layer waits for its
  // buckets); false: they are waited for in the step, exposed.
  bool overlap_gather = true;
};

// DDP reducer options (engine config "ddp").
struct DDPOptions {
  double bucket_mb = 25;
  double first_bucket_mb = 1;
  bool overlap = true;
  std::string compression = "none";  // none | fp16 | bf16 | topk
  double topk_ratio = 0.01;
};

struct BucketStat {
  int64_t bytes = 0;  // bytes on the wire (all_gather: the gathered output)
  double ms = 0;
  std::string op = "all_reduce";  // all_reduce | all_gather (topk, ZeRO) | reduce_scatter (ZeRO-2)
  // When the bucket's last gradient was accumulated, in ms from the start of
  // the step's (last micro-batch's) backward; < 0 when not known (overlap off).
  // The one-GPU input of the multi-GPU prediction (predict/, docs/predict.md).
  double ready_ms = -1;
};

// nccl-tests' definitions (doc/PERFORMANCE.md): algbw = bytes / time; busbw =
// algbw * 2(n-1)/n for all-reduce and algbw * (n-1)/n for all-gather and
// reduce-scatter (bytes: the gathered output, the scattered input). GB/s (1e9).
inline double algbw_gbs(const BucketStat& b) {
  return b.ms > 0 ? static_cast<double>(b.bytes) / (b.ms * 1e6) : 0;
}
inline double busbw_gbs(const BucketStat& b, int world_size) {
  double n = world_size;
  double factor = b.op == "all_reduce" ? 2 * (n - 1) / n : (n - 1) / n;
  return algbw_gbs(b) * factor;
}

// What the reducer did in the last step.
struct ReducerStats {
  double comm_ms = 0;          // sum of collective times on the comm stream
  double exposed_comm_ms = 0;  // time the step waited for communication after backward
  int64_t comm_bytes = 0;
  int collectives = 0;
  std::vector<BucketStat> buckets;
  // ZeRO-2's reducer (zero.cpp): the most bytes of full (padded fp32) bucket
  // buffers held at once in the step, the reducer's and its collectives'
  // references; -1 for a reducer that keeps its buckets (DDP's: the whole
  // gradient). On a GPU the caching allocator may keep a released buffer's
  // memory out of reuse a little longer, until the communication stream has
  // read it.
  int64_t held_peak_bytes = -1;
};

class GradReducer {
 public:
  virtual ~GradReducer() = default;
  // Before the backward of each micro-batch; communicate is true only for the
  // last micro-batch of a step (grad_accum > 1 accumulates locally first; a
  // reducer that reduces_each_micro_batch() communicates in every one).
  virtual void prepare(bool communicate) = 0;
  // After the last backward: launches what is left, waits, averages over ranks and
  // leaves the averaged gradients in each parameter's .grad().
  virtual void finalize() = 0;
  virtual ReducerStats stats() const = 0;
  // grad_accum > 1. A reducer that reduces every micro-batch (ZeRO-2's: it
  // keeps only the rank's shard between micro-batches) says so here, and the
  // trainer calls end_micro_batch() after each backward but the last (after
  // tensor parallelism's sequence-parallel sums): it launches what the
  // backward's hooks did not, waits, and folds the micro-batch's reduced
  // gradients into what it keeps. DDP's reducer accumulates in .grad() and
  // reduces once, in the last micro-batch: neither applies.
  virtual bool reduces_each_micro_batch() const { return false; }
  virtual void end_micro_batch() {}
  // Gradient storage the reducer holds beyond the parameters' .grad() (ZeRO-2:
  // the shard, reduce-scatter outputs not yet folded in, bucket buffers its
  // collectives still hold), for the trainer's count of the gradient bytes
  // held between micro-batches (accum_grad_bytes).
  virtual std::vector<c10::Storage> held_storage() const { return {}; }
  // fault.kind stall: in the next step's communicating backward, just before
  // bucket b (the last bucket when b is past it) is launched, the caller's
  // stream sleeps ms milliseconds (a spin kernel on a GPU, the host on the
  // CPU), so that bucket's collective waits past a small dist.timeout_ms.
  virtual void stall_before(int bucket, int ms) = 0;
  // fp16 loss scaling: the scale (a device scalar) this step's gradients carry,
  // before prepare(true). Top-k keeps its error-feedback residual unscaled, so
  // a scale that backs off does not leave it scaled by the old one.
  virtual void set_loss_scale(const torch::Tensor& scale) = 0;
  // After the step's found_inf is known (a device scalar; undefined without
  // loss scaling): top-k keeps the residual this step left unless found_inf,
  // so a skipped step's inf or NaN never enters it.
  virtual void end_step(const torch::Tensor& found_inf) = 0;
};

// params in registration order (model->parameters()); hooks are registered here.
// Like DDP's constructor it broadcasts the parameters from rank 0, so every rank
// starts from the same weights (buffers such as BatchNorm statistics are not
// parameters: the trainer broadcasts them or leaves them out of the checksum).
// Gradients become views into flat bucket storage: the reducer (re)binds each
// .grad() in prepare(), so zero_grad() may zero them or set them to none.
std::unique_ptr<GradReducer> make_reducer(const std::vector<torch::Tensor>& params,
                                          Communicator& comm, const DDPOptions& opts);

}  // namespace cs
