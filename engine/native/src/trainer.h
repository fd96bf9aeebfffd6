// trainer.h: one rank's training engine: model, optimizer, data, precision,
// CUDA graphs, data-parallel reducer, and the metrics of each step.
#pragma once

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <memory>
#include <vector>

#include "config.h"
#include "device.h"
#include "dist.h"
#include "model.h"
#include "optim.h"
#include "precision.h"

namespace cs {

// cs_describe's document for a config's model.
nlohmann::json describe_json(const ModelConfig& m);

class Trainer {
 public:
  explicit Trainer(const EngineConfig& cfg);
  ~Trainer();
  nlohmann::json info() const;
  nlohmann::json step();  // one optimizer step over grad_accum micro-batches
  nlohmann::json checksum();
  const torch::Device& device() const { return device_; }

  // Eager steps on the capture stream before the step is captured as a graph.
  static constexpr int kGraphWarmup = 3;
  static constexpr double kMaxGradNorm = 1.0;

 private:
  struct Guards;  // device / stream guards for one ABI call (trainer.cpp)
  void set_threads() const;
  std::vector<double> measure_layers_everywhere();  // pipeline.balance_by time
  void inject_fault_before_step();
  void zero_grads();
  // forward + backward for every micro-batch, reducer, clip, optimizer; leaves
  // [loss, grad_norm, found_inf, loss_scale] in metrics_. Marks the timeline when
  // timed (not during graph capture).
  void run_step(const std::vector<Batch>& batches, bool timed);
  void capture(const std::vector<Batch>& batches);
  nlohmann::json metrics_json(bool replayed);

  EngineConfig cfg_;
  torch::Device device_;
  const Family* family_;
  Facts facts_;
  std::shared_ptr<Model> model_;
  std::unique_ptr<DataSource> data_;
  std::vector<torch::Tensor> params_;
  std::unique_ptr<Optimizer> optim_;
  std::unique_ptr<LossScaler> scaler_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<GradReducer> reducer_;
  std::unique_ptr<Timeline> timeline_;
  torch::Tensor metrics_;  // device, float32 [4]
  int64_t step_ = 0;
  int threads_ = 1;
  double peak_tflops_ = 0;
  int64_t mem_after_setup_ = 0;
  std::string name_;

  // CUDA graphs (trainer.cpp keeps the CUDA types out of this header).
  struct Graph;
  std::unique_ptr<Graph> graph_;

  // Pipeline parallelism (pipeline.h): set when pipeline.stages > 1; destroyed
  // before comm_, whose Gloo store its groups use.
  std::unique_ptr<class Pipeline> pipe_;
};

}  // namespace cs
