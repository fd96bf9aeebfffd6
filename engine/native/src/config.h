// config.h: the engine configuration (engine/config.go is the JSON contract).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "dist.h"
#include "model.h"

namespace cs {

// Thrown for an out-of-memory condition the engine detects or injects:
// becomes CS_ERR_OOM at the ABI (as do c10::OutOfMemoryError and CUDA OOM texts).
struct OOMError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class Precision { FP32, TF32, BF16, FP16, FP8 };
const char* precision_name(Precision p);

struct PipelineOptions {
  int stages = 1;
  int microbatches = 1;
  std::string schedule = "gpipe";  // gpipe | 1f1b
  std::vector<int> balance;        // layers per stage; empty: split by balance_by
  std::string balance_by = "params";  // params | time (measured per-layer time)
};

// Fault injection for the runner's failure tests. crash | abort | exit are done by
// the Go worker; the engine does error | oom | hang | slow | stall.
struct FaultOptions {
  std::string kind;  // "" = none
  int rank = 0;
  int64_t at_step = 0;  // 0-based step index (the first cs_step is step 0)
  int slow_ms = 0;      // slow: per step; stall: the one stall's length
  int bucket = 0;       // stall: the DDP bucket it comes before
};

// precision fp8 (fp8_linear.h): how the linear layers' FP8 operands are scaled
// (tensor: one amax per tensor; row: one per row of each operand) and the
// format of the gradients (e5m2, or e4m3 as the activations and weights).
struct Fp8Options {
  std::string scaling = "tensor";  // tensor | row
  std::string grad = "e5m2";       // e5m2 | e4m3
};

// Tensor parallelism (engine config "tp"; tp.h, docs/tensor-parallel.md):
// degree ranks per tensor group, ranks tensor-fastest, then data, then pipeline
// (rank = t + degree * (d + dp * stage));
// sequence_parallel splits LayerNorm and the residual stream along the sequence.
struct TpOptions {
  int degree = 1;  // 1: none
  bool sequence_parallel = false;
};

struct EngineConfig {
  ModelConfig model;
  std::string device = "cpu";  // cpu | cuda
  int device_index = 0;
  int threads = 0;  // 0: all cores
  Precision precision = Precision::FP32;
  bool graphs = false;
  int64_t grad_accum = 1;
  double lr = 0;           // 0: the family's default
  double peak_tflops = 0;  // 0: from the device table
  DistOptions dist;
  DDPOptions ddp;
  PipelineOptions pipeline;
  ZeroOptions zero;
  TpOptions tp;
  Fp8Options fp8;
  FaultOptions fault;
};

// Parses and validates a config JSON document. Throws ConfigError naming the
// field. With model_only, fields outside the model are not validated (cs_describe).
EngineConfig parse_config(const std::string& json, bool model_only = false);

// The most steps one cs_steps or cs_profile call runs.
constexpr int kMaxRequestSteps = 1000;

// An ABI call's request document (cs_steps, cs_profile): a JSON object with no
// key outside fields, its "steps" (where present) an integer in
// 1..kMaxRequestSteps and its other fields strings. Throws ConfigError
// "<what>: ...".
nlohmann::json parse_request(const std::string& what, const std::string& text,
                             const std::vector<std::string>& fields);

}  // namespace cs
