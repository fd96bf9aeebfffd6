// pipeline.h: pipeline parallelism (docs/pipeline.md). pipeline.stages = S cuts
// the model's layers (Model::num_layers) into S consecutive stages; rank
// r = dp_rank * S + stage of a trial of S x DP ranks runs one stage of one
// data-parallel replica. A step runs M = pipeline.microbatches x grad_accum
// micro-batches through the GPipe or 1F1B schedule, averages the stage's
// gradients over its DP group, sums tied weights' gradients between their
// owning stage and the last stage, and clips by the norm over all stages.
//
// With tp.degree > 1 (docs/tensor-parallel.md) a stage's layers are
// tensor-parallel: ranks follow tp::Mesh instead (rank = tensor + tp * (data +
// dp * stage): tensor-fastest, then data, then pipeline), the pipeline and
// stage groups are the mesh's pipeline and data groups (connect_mesh), a
// tied weight's shard is summed between the same tensor rank of its two
// stages, and the norm counts the sharded parameters' squares over the tensor
// group and the replicated ones once.
#pragma once

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "config.h"
#include "device.h"
#include "model.h"
#include "pipeline_group.h"
#include "tp.h"

namespace cs {

class TensorParallelModel;

// Layers per stage: S contiguous, non-empty runs over the layers' weights that
// minimise the heaviest stage (ties: the earliest stages take more).
std::vector<int> balance_by_weight(const std::vector<double>& weights, int stages);

// Forward + backward time in ms of each pipeline layer on batch with the
// whole model on device, under the step's precision: the median of 3 timed
// passes after a warm-up, each layer timed alone (its input a leaf, as a stage
// receives it). pipeline.balance_by: time splits by these. Parameters,
// gradients and buffers (BatchNorm statistics) are left as they were.
std::vector<double> measure_layer_ms(Model& model, const Batch& batch, torch::Device device,
                                     Precision precision);

// GPipe's and 1F1B's idle share with S stages and M equal micro-batches.
inline double theory_bubble(int stages, int64_t microbatches) {
  return double(stages - 1) / double(microbatches + stages - 1);
}

// The step's loss (mean over micro-batches), the gradient norm before clipping
// and found_inf (fp16), all 0-d float32 on the device and equal on every stage.
struct PipelineStep {
  torch::Tensor loss, norm, found_inf;
};

class Pipeline {
 public:
  // Places this rank and splits model: by pipeline.balance, else by layer_ms
  // (measured per-layer times, the same on every rank) when given, else by
  // parameter count. Throws ConfigError for a layout that does not fit
  // (stages vs. ranks, layers, pipeline.balance).
  Pipeline(const EngineConfig& cfg, Model& model, torch::Device device,
           std::vector<double> layer_ms = {});
  ~Pipeline();

  int stage() const { return stage_; }
  int stages() const { return stages_; }
  int dp_rank() const { return dp_rank_; }
  int dp_size() const { return dp_size_; }
  bool first() const { return stage_ == 0; }
  bool last() const { return stage_ == stages_ - 1; }
  bool needs_data() const { return first() || last(); }  // inputs / targets
  // The stage keeps p (its layers' parameters and, on the last stage, the tied
  // weights loss() reads); owns(p): p is counted here (norm, checksum).
  bool holds(const torch::Tensor& p) const;
  bool owns(const torch::Tensor& p) const;
  // Frees the storage of the parameters this stage does not keep; call before
  // the model moves to the device.
  void release_others();
  // Joins the pipeline and stage groups over the trial's communicator.
  void connect(Communicator& world, const DistOptions& dist);
  // tp.degree > 1: uses the mesh's pipeline group (pipe: this rank's stage's
  // neighbours, same tensor and data rank) and data group (data, nullptr at
  // dp 1: the stage's replicas, same tensor rank), which the caller owns and
  // closes; model's tensor group ctx sums the sequence-parallel gradients and
  // the sharded parameters' squares. Instead of connect.
  void connect_mesh(PipeGroup* pipe, PipeGroup* data, TensorParallelModel* model,
                    const tp::Context& ctx);
  // Closes the groups it made (PipeGroup::close); throws the first failure.
  void close();

  // Forward and backward of every micro-batch (batches: empty on middle stages),
  // DP average, tied-weight sum, unscale by 1/loss_scale (undefined: none) and
  // clipping to max_norm over all stages.
  PipelineStep step(const std::vector<Batch>& batches, const torch::Tensor& loss_scale,
                    double max_norm);

  nlohmann::json info() const;
  // Overwrites the step metrics the pipeline owns (forward/backward, bubble,
  // communication, per-rank samples) and adds "stages".
  void add_metrics(nlohmann::json& m) const;

 private:
  struct Slot;
  struct Stats;
  int mark();
  void forward(int i, const Batch& b);
  torch::Tensor backward(int i, const torch::Tensor& grad);
  void p2p(std::vector<P2POp> ops);
  // Megatron's point-to-point calls (schedules.py); no-ops at the ends.
  void recv_forward(int i);
  void send_forward(int i);
  torch::Tensor send_forward_recv_backward(int send_i, int recv_i);
  void send_backward_recv_forward(int send_i, const torch::Tensor& dx, int recv_i);
  torch::Tensor recv_backward(int i);
  void send_backward(int i, const torch::Tensor& dx);
  void run_gpipe();
  void run_1f1b();
  void reduce_sequence_parallel();
  void reduce_data_parallel();
  void sum_tied();
  PipelineStep clip(const torch::Tensor& loss_scale, double max_norm);

  Model& model_;
  torch::Device device_;
  Precision precision_;
  std::string schedule_;
  int stages_, stage_, dp_rank_, dp_size_;
  int64_t first_layer_ = 0, last_layer_ = 0;
  std::vector<int> balance_;
  std::string balance_by_;          // how balance_ was found: manual | params | time
  std::vector<double> layer_ms_;    // measured per-layer times (balance_by time)
  std::unordered_set<const void*> held_, owned_;
  std::vector<torch::Tensor> held_list_;  // registration order
  struct Tied {
    torch::Tensor param;
    int peer;  // the other stage of the pair (owner <-> last)
    int tag;
  };
  std::vector<Tied> tied_;  // on the owner and the last stage, in loss_parameters() order
  std::unique_ptr<PipeGroup> own_pipe_, own_dp_;  // connect's (connect_mesh: the caller's)
  PipeGroup* pipe_ = nullptr;
  PipeGroup* dp_ = nullptr;
  TensorParallelModel* tpm_ = nullptr;  // connect_mesh: the stage's layers are tensor-parallel
  tp::Context tp_ctx_;

  // The step in flight.
  const std::vector<Batch>* batches_ = nullptr;
  std::vector<Slot> slots_;
  int64_t m_ = 0;
  torch::Tensor loss_sum_, backward_scale_;
  std::vector<int64_t> in_shape_, out_shape_;  // agreed with the neighbours at the first send
  torch::ScalarType in_dtype_ = torch::kFloat, out_dtype_ = torch::kFloat;
  bool in_known_ = false, out_known_ = false;
  std::unique_ptr<Timeline> timeline_;
  int timeline_cap_ = 0, next_mark_ = 0;
  std::unique_ptr<Stats> stats_;
};

}  // namespace cs
