// trainer.h: one rank's training engine: model, optimizer, data, precision,
// CUDA graphs, data-parallel reducer, and the metrics of each step.
#pragma once

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config.h"
#include "cudnn_tuning.h"
#include "device.h"
#include "dist.h"
#include "model.h"
#include "optim.h"
#include "precision.h"

namespace cs {

// cs_describe's document for a config's model.
nlohmann::json describe_json(const ModelConfig& m);

// The phases of cs_create (info()'s "init_phases"): begin(name) ends the
// current phase and starts name. Every name is listed once, in the order it was
// first begun; a name begun again adds to its entry, so the phases add up to
// the whole. On CUDA each phase ends when the device has done its work.
class InitPhases {
 public:
  // device: the trainer's, which init_device sets (waited for on CUDA).
  explicit InitPhases(const torch::Device& device) : device_(device) {}
  void begin(const std::string& name);
  void end();
  nlohmann::json to_json() const;  // [{"name", "ms"}, ...]

 private:
  const torch::Device& device_;
  std::vector<std::pair<std::string, double>> phases_;
  std::string current_;
  std::chrono::steady_clock::time_point start_;
};

class Trainer {
 public:
  // Builds the engine in the phases InitPhases records: device_init,
  // model_build, optimizer, data_setup, comm_init (docs/engine.md).
  explicit Trainer(const EngineConfig& cfg);
  ~Trainer();
  nlohmann::json info() const;
  nlohmann::json step();  // one optimizer step over grad_accum micro-batches
  // n steps issued back to back with one wait for the device at the end: the
  // host issues a step while the device finishes the one before (a training
  // loop that reads its metrics every n steps). Each step keeps its own events;
  // data parallel and pipelined steps are read one at a time. [metrics, ...]
  nlohmann::json steps(int n);
  nlohmann::json checksum();
  // Orderly teardown (cs_destroy): waits for the device's queued work (an
  // asynchronous device error surfaces here) and closes the communicators;
  // throws the first failure. The destructor frees the rest and cannot fail.
  void close();
  const torch::Device& device() const { return device_; }

  // Eager steps on the capture stream before the step is captured as a graph.
  static constexpr int kGraphWarmup = 3;
  static constexpr double kMaxGradNorm = 1.0;

 private:
  struct Guards;  // device / stream guards for one ABI call (trainer.cpp)
  // The constructor's steps, in order.
  void init_device();      // the device, its context and handles, what the config may use on it
  void build_model();      // parameters on the device from the seed; this rank's pipeline stage
  void build_optimizer();  // optimizer states, loss scaler
  void build_data();       // this rank's data source
  void connect();          // communicator, equal start, DDP reducer or pipeline groups
  void build_mesh();       // tp.degree > 1: the communicator and the tensor and data groups
  // tp.degree > 1, after the backward: sequence-parallel gradients summed over
  // the tensor group, the data group's average, the norm over the whole model.
  ClipResult reduce_and_clip_tp(const torch::Tensor& inv_scale, bool apply);
  // tp.degree > 1: the step's tensor- and data-group collectives into m.
  void add_tp_comm(nlohmann::json& m);
  bool data_parallel() const;
  void set_threads() const;
  void note_libraries();
  std::vector<double> measure_layers_everywhere();  // pipeline.balance_by time
  void inject_fault_before_step();
  void arm_overflow_fault();  // fault.kind overflow: a gradient hook on this rank
  void zero_grads();
  int64_t gradient_bytes_held() const;  // reducer_ set: .grad()s and the reducer's (trainer.cpp)
  // forward + backward for every micro-batch, reducer, clip, optimizer; leaves
  // [loss, grad_norm, found_inf, loss_scale] in metrics_. Marks the timeline when
  // timed (not during graph capture).
  void run_step(const std::vector<Batch>& batches, Timeline* timed);
  void capture(const std::vector<Batch>& batches);
  // A step issued to the device, not yet read back: its index, whether it was a
  // graph replay, and its metrics vector (its own: a replay's is copied out).
  struct Issued {
    int64_t step;
    bool replayed;
    torch::Tensor metrics;
    // With a reducer and grad_accum > 1: the most gradient bytes held after a
    // micro-batch's backward but the last (gradient_bytes_held); else -1.
    int64_t accum_grad_bytes = -1;
  };
  Issued issue(Timeline& tl);  // one step, timed on tl; nothing waits for the device
  // The metrics of an issued step whose last event is done (mem: the window's peaks).
  nlohmann::json metrics_json(const Issued& s, Timeline& tl, const MemoryStats& mem);

  EngineConfig cfg_;
  torch::Device device_;
  const Family* family_;
  Facts facts_;
  CudnnTuning cudnn_;  // CASESTUDY_CUDNN_BENCHMARK_LIMIT, for families with convolutions
  std::shared_ptr<Model> model_;
  std::unique_ptr<DataSource> data_;
  std::vector<torch::Tensor> params_;
  std::unique_ptr<Optimizer> optim_;
  std::unique_ptr<LossScaler> scaler_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<GradReducer> reducer_;
  std::vector<std::unique_ptr<Timeline>> timelines_;  // one for each step of a steps() call
  torch::Tensor metrics_;  // device, float32 [4]
  int64_t accum_grad_bytes_ = -1;  // this step's Issued::accum_grad_bytes
  int64_t step_ = 0;
  int threads_ = 1;
  double peak_tflops_ = 0;
  double max_grad_norm_ = 0;  // the clip threshold, read once at construction (trainer.cpp max_grad_norm)
  int64_t mem_after_setup_ = 0;
  std::string name_;
  nlohmann::json libraries_ = nlohmann::json::object();  // note_libraries(): loaded_libs.h
  std::string cudnn_runtime_;
  InitPhases phases_;

  // CUDA graphs (trainer.cpp keeps the CUDA types out of this header).
  struct Graph;
  std::unique_ptr<Graph> graph_;

  // Pipeline parallelism (pipeline.h): set when pipeline.stages > 1; destroyed
  // before comm_, whose Gloo store its groups use.
  std::unique_ptr<class Pipeline> pipe_;

  // Tensor parallelism (tp.h, tp_model.h): set when tp.degree > 1; destroyed
  // before comm_, whose store its Gloo groups use.
  struct TpState;
  std::unique_ptr<TpState> tp_;

  // ZeRO (zero.h): set when zero.stage > 0, in place of optim_; destroyed
  // before reducer_ and comm_, which it (and its reducer) use.
  std::unique_ptr<class ZeroOptimizer> zero_;

  // CASESTUDY_INTERFERE's load beside each backward (interfere.h); null unset.
  std::unique_ptr<class Interference> interf_;
};

}  // namespace cs
