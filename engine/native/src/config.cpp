// config.cpp: the engine config JSON (engine/config.go) into EngineConfig, with
// every value validated and every error naming its field.
#include "config.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <sstream>

#include "resnet_fusion.h"

namespace cs {
namespace {

using json = nlohmann::json;

std::string show(const json& v) {
  auto s = v.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

// Reads the fields of one JSON object and remembers which keys it knew, so that
// unknown keys (typos) are refused by name.
class Fields {
 public:
  Fields(const json& obj, std::string prefix) : obj_(obj), prefix_(std::move(prefix)) {
    if (!obj_.is_object())
      throw ConfigError(where("") + "must be a JSON object, got " + show(obj_));
  }

  int64_t integer(const std::string& key, int64_t def) {
    const json* v = get(key);
    if (!v || v->is_null()) return def;
    if (v->is_number_integer()) return v->get<int64_t>();
    if (v->is_number_float()) {
      double d = v->get<double>();
      if (std::floor(d) == d && std::abs(d) < 9e15) return int64_t(d);
    }
    throw ConfigError(where(key) + "must be an integer, got " + show(*v));
  }
  double number(const std::string& key, double def) {
    const json* v = get(key);
    if (!v || v->is_null()) return def;
    if (!v->is_number()) throw ConfigError(where(key) + "must be a number, got " + show(*v));
    double d = v->get<double>();
    if (!std::isfinite(d)) throw ConfigError(where(key) + "must be finite, got " + show(*v));
    return d;
  }
  bool boolean(const std::string& key, bool def) {
    const json* v = get(key);
    if (!v || v->is_null()) return def;
    if (!v->is_boolean()) throw ConfigError(where(key) + "must be true or false, got " + show(*v));
    return v->get<bool>();
  }
  std::string str(const std::string& key, const std::string& def) {
    const json* v = get(key);
    if (!v || v->is_null()) return def;
    if (!v->is_string()) throw ConfigError(where(key) + "must be a string, got " + show(*v));
    return v->get<std::string>();
  }
  std::vector<int> int_list(const std::string& key) {
    const json* v = get(key);
    std::vector<int> out;
    if (!v || v->is_null()) return out;
    if (!v->is_array()) throw ConfigError(where(key) + "must be a list of integers, got " + show(*v));
    for (const auto& e : *v) {
      if (!e.is_number_integer())
        throw ConfigError(where(key) + "must be a list of integers, got " + show(*v));
      out.push_back(e.get<int>());
    }
    return out;
  }
  const json& object(const std::string& key) {
    static const json empty = json::object();
    const json* v = get(key);
    return (!v || v->is_null()) ? empty : *v;
  }
  // Names the first key nobody asked for.
  void refuse_unknown() const {
    for (auto it = obj_.begin(); it != obj_.end(); ++it)
      if (!known_.count(it.key()))
        throw ConfigError("unknown config field \"" + prefix_ + it.key() +
                          "\" (see docs/engine.md for the fields)");
  }
  std::string where(const std::string& key) const { return prefix_ + key + " "; }

 private:
  const json* get(const std::string& key) {
    known_.insert(key);
    auto it = obj_.find(key);
    return it == obj_.end() ? nullptr : &*it;
  }
  const json& obj_;
  std::string prefix_;
  std::set<std::string> known_;
};

template <typename T>
void at_least(const std::string& field, T v, T min) {
  if (v < min) {
    std::ostringstream m;
    m << field << " must be ≥ " << min << ", got " << v;
    throw ConfigError(m.str());
  }
}

void one_of(const std::string& field, const std::string& v, std::initializer_list<const char*> ok) {
  std::string list;
  for (const char* o : ok) {
    if (v == o) return;
    list += list.empty() ? "" : ", ";
    list += o;
  }
  throw ConfigError(field + " must be one of " + list + ", got \"" + v + "\"");
}

Precision parse_precision(const std::string& p) {
  if (p == "" || p == "fp32") return Precision::FP32;
  if (p == "tf32") return Precision::TF32;
  if (p == "bf16") return Precision::BF16;
  if (p == "fp16") return Precision::FP16;
  if (p == "fp8") return Precision::FP8;
  throw ConfigError("precision must be one of fp32, tf32, bf16, fp16, fp8, got \"" + p + "\"");
}

// tp (docs/tensor-parallel.md): the degree against the world, and the
// combinations this engine does not implement, each refused with its reason.
void check_tp(const EngineConfig& c) {
  const TpOptions& t = c.tp;
  if (t.degree == 0) throw ConfigError("tp.degree must be ≥ 1, got 0 (1: no tensor parallelism)");
  at_least("tp.degree", t.degree, 1);
  if (t.degree == 1) {
    if (t.sequence_parallel)
      throw ConfigError("tp.sequence_parallel splits a tensor-parallel group's activations along "
                        "the sequence: it needs tp.degree > 1");
    return;
  }
  const std::string what = "tp.degree " + std::to_string(t.degree);
  if (c.model.family == "resnet50")
    throw UnsupportedError("ResNet-50 is not tensor-parallel: " + what +
                           " applies to gpt and bert (use data parallel for resnet50)");
  if (c.model.family != "gpt" && c.model.family != "bert")
    throw UnsupportedError(what + ": tensor parallelism is implemented for gpt and bert only, not "
                           "for " + c.model.family + " (docs/tensor-parallel.md)");
  if (c.dist.world_size % t.degree != 0)
    throw ConfigError(what + " must divide dist.world_size (" + std::to_string(c.dist.world_size) +
                      "): ranks form tensor groups of tp.degree consecutive ranks");
  if (c.pipeline.stages > 1 && c.dist.world_size % (t.degree * c.pipeline.stages) != 0)
    throw ConfigError(what + " x pipeline.stages " + std::to_string(c.pipeline.stages) +
                      " must divide dist.world_size (" + std::to_string(c.dist.world_size) +
                      "): ranks are tensor-fastest, then data, then pipeline");
  if (c.pipeline.stages > 1 && c.pipeline.balance_by == "time")
    throw UnsupportedError(what + " with pipeline.balance_by time is not implemented (the layer "
                                  "timing runs the whole model on one rank): use params or "
                                  "pipeline.balance");
  if (c.zero.stage > 0 && c.pipeline.stages > 1)
    throw UnsupportedError("zero.stage " + std::to_string(c.zero.stage) + " with " + what +
                           " and pipeline.stages > 1 is not implemented (ZeRO under a pipeline)");
  // ZeRO shards over the data group (zero.h): a group of one has nothing to shard.
  if (c.zero.stage > 0 && c.dist.world_size / t.degree < 2)
    throw UnsupportedError("zero.stage " + std::to_string(c.zero.stage) + " with " + what + " and dist.world_size " +
                           std::to_string(c.dist.world_size) +
                           ": one data-parallel rank, nothing to shard (ZeRO shards over the data group of "
                           "dist.world_size / tp.degree ranks; use zero.stage 0)");
  if (c.graphs) throw UnsupportedError(what + " with graphs is not implemented");
  if (c.precision == Precision::FP8)
    throw UnsupportedError(what + " with precision fp8 is not implemented (the tensor-parallel "
                                  "layers are plain linear layers): use bf16");
  if (c.model.activation_checkpointing)
    throw UnsupportedError(what + " with activation_checkpointing is not implemented");
  if (c.ddp.compression != "none")
    throw UnsupportedError(what + " with ddp.compression " + c.ddp.compression +
                           " is not implemented: the data group all-reduces fp32 gradients");
  if (c.fault.kind == "stall")
    throw UnsupportedError(what + ": fault.kind stall stalls a DDP bucket; a tensor-parallel run "
                                  "has no DDP reducer");
}

}  // namespace

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::FP32: return "fp32";
    case Precision::TF32: return "tf32";
    case Precision::BF16: return "bf16";
    case Precision::FP16: return "fp16";
    case Precision::FP8: return "fp8";
  }
  return "?";
}

EngineConfig parse_config(const std::string& text, bool model_only) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    throw ConfigError(std::string("config is not valid JSON: ") + e.what());
  }
  Fields f(doc, "");
  EngineConfig c;
  auto& m = c.model;

  m.family = f.str("family", "");
  m.preset = f.str("preset", "");
  if (m.family.empty()) throw ConfigError("family is required (gpt, bert or resnet50)");
  if (m.preset.empty()) throw ConfigError("preset is required (e.g. tiny, 124m)");
  m.layers = f.integer("layers", 0);
  at_least<int64_t>("layers", m.layers, 0);
  m.hidden = f.integer("hidden", 0);
  at_least<int64_t>("hidden", m.hidden, 0);
  m.micro_batch = f.integer("micro_batch", 1);
  at_least<int64_t>("micro_batch", m.micro_batch, 1);
  m.seq_len = f.integer("seq_len", 0);
  at_least<int64_t>("seq_len", m.seq_len, 0);
  m.image_size = f.integer("image_size", 0);
  at_least<int64_t>("image_size", m.image_size, 0);
  m.activation_checkpointing = f.boolean("activation_checkpointing", false);
  m.channels_last = f.boolean("channels_last", false);
  m.seed = f.integer("seed", 0);

  c.device = f.str("device", "cpu");
  if (c.device.empty()) c.device = "cpu";
  c.device_index = int(f.integer("device_index", 0));
  c.threads = int(f.integer("threads", 0));
  c.precision = parse_precision(f.str("precision", "fp32"));
  c.graphs = f.boolean("graphs", false);
  c.grad_accum = f.integer("grad_accum", 1);
  c.lr = f.number("lr", 0);
  c.peak_tflops = f.number("peak_tflops", 0);

  Fields d(f.object("dist"), "dist.");
  c.dist.rank = int(d.integer("rank", 0));
  c.dist.world_size = int(d.integer("world_size", 1));
  c.dist.backend = d.str("backend", "");
  c.dist.store_addr = d.str("store_addr", "");
  c.dist.store_port = int(d.integer("store_port", 0));
  c.dist.store_token = d.str("store_token", "");
  c.dist.nccl_id_hex = d.str("nccl_id", "");
  c.dist.timeout_ms = int(d.integer("timeout_ms", 0));

  Fields dp(f.object("ddp"), "ddp.");
  c.ddp.bucket_mb = dp.number("bucket_mb", 0);
  c.ddp.first_bucket_mb = dp.number("first_bucket_mb", 0);
  c.ddp.overlap = dp.boolean("overlap", true);
  c.ddp.compression = dp.str("compression", "none");
  c.ddp.topk_ratio = dp.number("topk_ratio", 0);

  Fields p(f.object("pipeline"), "pipeline.");
  c.pipeline.stages = int(p.integer("stages", 1));
  c.pipeline.microbatches = int(p.integer("microbatches", 1));
  c.pipeline.schedule = p.str("schedule", "gpipe");
  c.pipeline.balance = p.int_list("balance");
  c.pipeline.balance_by = p.str("balance_by", "params");

  Fields z(f.object("zero"), "zero.");
  c.zero.stage = int(z.integer("stage", 0));
  c.zero.overlap_gather = z.boolean("overlap_gather", true);

  Fields tp(f.object("tp"), "tp.");
  c.tp.degree = int(tp.integer("degree", 1));
  c.tp.sequence_parallel = tp.boolean("sequence_parallel", false);

  Fields rn(f.object("resnet"), "resnet.");
  m.resnet_fusion = rn.str("fusion", "off");

  Fields f8(f.object("fp8"), "fp8.");
  c.fp8.scaling = f8.str("scaling", "tensor");
  c.fp8.grad = f8.str("grad", "e5m2");

  Fields fl(f.object("fault"), "fault.");
  c.fault.kind = fl.str("kind", "");
  c.fault.rank = int(fl.integer("rank", 0));
  c.fault.at_step = fl.integer("at_step", 0);
  c.fault.slow_ms = int(fl.integer("slow_ms", 0));
  c.fault.bucket = int(fl.integer("bucket", 0));

  f.refuse_unknown();
  d.refuse_unknown();
  dp.refuse_unknown();
  p.refuse_unknown();
  z.refuse_unknown();
  tp.refuse_unknown();
  f8.refuse_unknown();
  rn.refuse_unknown();
  fl.refuse_unknown();
  if (m.resnet_fusion.empty()) m.resnet_fusion = "off";
  one_of("resnet.fusion", m.resnet_fusion, {"off", "cudnn"});
  if (model_only) return c;

  // Engine fields. 0 means "the default" where engine/config.go says so.
  one_of("device", c.device, {"cpu", "cuda"});
  at_least("device_index", c.device_index, 0);
  at_least("threads", c.threads, 0);
  if (c.grad_accum == 0) c.grad_accum = 1;
  at_least<int64_t>("grad_accum", c.grad_accum, 1);
  at_least("lr", c.lr, 0.0);
  at_least("peak_tflops", c.peak_tflops, 0.0);

  if (c.dist.world_size == 0) c.dist.world_size = 1;
  at_least("dist.world_size", c.dist.world_size, 1);
  at_least("dist.rank", c.dist.rank, 0);
  if (c.dist.rank >= c.dist.world_size)
    throw ConfigError("dist.rank must be < dist.world_size (" + std::to_string(c.dist.world_size) +
                      "), got " + std::to_string(c.dist.rank));
  if (!c.dist.backend.empty()) one_of("dist.backend", c.dist.backend, {"nccl", "gloo", "gloo-staged"});
  at_least("dist.store_port", c.dist.store_port, 0);
  if (c.dist.store_port > 65535)
    throw ConfigError("dist.store_port must be ≤ 65535, got " + std::to_string(c.dist.store_port));
  if (c.dist.timeout_ms == 0) c.dist.timeout_ms = 600000;
  at_least("dist.timeout_ms", c.dist.timeout_ms, 1);

  if (c.ddp.bucket_mb == 0) c.ddp.bucket_mb = 25;
  if (c.ddp.first_bucket_mb == 0) c.ddp.first_bucket_mb = 1;
  if (c.ddp.bucket_mb < 0 || c.ddp.first_bucket_mb < 0)
    throw ConfigError("ddp.bucket_mb and ddp.first_bucket_mb must be > 0");
  if (c.ddp.compression.empty()) c.ddp.compression = "none";
  one_of("ddp.compression", c.ddp.compression, {"none", "fp16", "bf16", "topk"});
  if (c.ddp.topk_ratio == 0) c.ddp.topk_ratio = 0.01;
  if (c.ddp.topk_ratio <= 0 || c.ddp.topk_ratio > 1)
    throw ConfigError("ddp.topk_ratio must be in (0, 1], got " + std::to_string(c.ddp.topk_ratio));

  if (c.pipeline.stages == 0) c.pipeline.stages = 1;
  at_least("pipeline.stages", c.pipeline.stages, 1);
  if (c.pipeline.microbatches == 0) c.pipeline.microbatches = 1;
  at_least("pipeline.microbatches", c.pipeline.microbatches, 1);
  if (c.pipeline.schedule.empty()) c.pipeline.schedule = "gpipe";
  one_of("pipeline.schedule", c.pipeline.schedule, {"gpipe", "1f1b"});
  if (!c.pipeline.balance.empty() && int(c.pipeline.balance.size()) != c.pipeline.stages)
    throw ConfigError("pipeline.balance must have one entry per stage (" +
                      std::to_string(c.pipeline.stages) + "), got " +
                      std::to_string(c.pipeline.balance.size()));
  for (int b : c.pipeline.balance) at_least("pipeline.balance entries", b, 1);
  if (c.pipeline.balance_by.empty()) c.pipeline.balance_by = "params";
  one_of("pipeline.balance_by", c.pipeline.balance_by, {"params", "time"});
  if (c.pipeline.balance_by == "time" && !c.pipeline.balance.empty())
    throw ConfigError("pipeline.balance_by time measures the split; leave pipeline.balance unset "
                      "or set balance_by params");

  if (c.fp8.scaling.empty()) c.fp8.scaling = "tensor";
  one_of("fp8.scaling", c.fp8.scaling, {"tensor", "row"});
  if (c.fp8.grad.empty()) c.fp8.grad = "e5m2";
  one_of("fp8.grad", c.fp8.grad, {"e5m2", "e4m3"});

  if (c.zero.stage < 0 || c.zero.stage > 2)
    throw ConfigError("zero.stage must be 0, 1 or 2, got " + std::to_string(c.zero.stage));

  check_tp(c);
  check_resnet_fusion(m.resnet_fusion, m.family, precision_name(c.precision), m.channels_last,
                      c.device, m.activation_checkpointing);

  if (!c.fault.kind.empty())
    one_of("fault.kind", c.fault.kind, {"crash", "abort", "exit", "hang", "slow", "oom", "error", "stall", "overflow"});
  if (c.fault.kind == "overflow" && c.precision != Precision::FP16)
    throw ConfigError("fault.kind overflow puts an inf in a gradient for the loss scaler to skip: it needs "
                      "precision fp16 (precision is " + std::string(precision_name(c.precision)) + ")");
  if (c.fault.kind == "overflow" && c.graphs)
    throw ConfigError("fault.kind overflow needs eager steps: set graphs false");
  at_least("fault.rank", c.fault.rank, 0);
  at_least<int64_t>("fault.at_step", c.fault.at_step, 0);
  at_least("fault.slow_ms", c.fault.slow_ms, 0);
  if (c.fault.kind == "slow" && c.fault.slow_ms == 0)
    throw ConfigError("fault.slow_ms must be ≥ 1 when fault.kind is slow");
  at_least("fault.bucket", c.fault.bucket, 0);
  if (c.fault.kind == "stall" && c.fault.slow_ms == 0)
    throw ConfigError("fault.slow_ms (the stall's length) must be ≥ 1 when fault.kind is stall");
  if (c.fault.kind == "stall" && c.pipeline.stages > 1)
    throw ConfigError("fault.kind stall stalls a DDP bucket: it needs data parallel without a "
                      "pipeline (pipeline.stages is " + std::to_string(c.pipeline.stages) + ")");
  return c;
}

json parse_request(const std::string& what, const std::string& text,
                   const std::vector<std::string>& fields) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw ConfigError(what + ": " + e.what());
  }
  if (!j.is_object()) throw ConfigError(what + ": expected a JSON object");
  for (const auto& kv : j.items()) {
    const std::string& k = kv.key();
    if (std::find(fields.begin(), fields.end(), k) == fields.end())
      throw ConfigError(what + ": unknown field \"" + k + "\"");
    if (k != "steps") {
      if (!kv.value().is_string()) throw ConfigError(what + ": " + k + " must be a string");
      continue;
    }
    if (!kv.value().is_number_integer()) throw ConfigError(what + ": steps must be an integer");
    const int64_t n = kv.value().get<int64_t>();
    if (n < 1 || n > kMaxRequestSteps)
      throw ConfigError(what + ": steps " + std::to_string(n) + " is out of range 1.." +
                        std::to_string(kMaxRequestSteps));
  }
  return j;
}

}  // namespace cs
