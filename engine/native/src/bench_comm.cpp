// bench_comm.cpp: bench_allreduce (cs_bench_allreduce in capi.cpp), the
// project's all-reduce microbenchmark on the same Communicator the reducer uses
// (`casestudy bench allreduce`).
//
// Config JSON: {"device":"cpu|cuda","device_index":0,"threads":0,
//   "dist":{...as the engine config...},"sizes":[bytes,...],"iters":20,"warmup":5}
// Output JSON: {"backend","version","world_size","rank","device",
//   "results":[{"bytes":N,"count":N,"ms":[per timed iteration]}]}
// Every rank runs the same sequence; each size is checked once for a correct
// sum before it is timed, and each iteration is one all-reduce timed on the
// communication stream (CUDA events / host clock of the Gloo call).
#include "dist.h"
#include "model.h"
#include "nlohmann/json.hpp"

namespace cs {
namespace {

using nlohmann::json;

struct BenchConfig {
  torch::Device device = torch::kCPU;
  int threads = 0;
  DistOptions dist;
  std::vector<int64_t> sizes;
  int iters = 20, warmup = 5;
};

template <typename T>
T field(const json& j, const char* key, T def) {
  if (!j.contains(key) || j.at(key).is_null()) return def;
  try {
    return j.at(key).get<T>();
  } catch (const json::exception& e) {
    throw ConfigError(std::string("bench config: field \"") + key + "\": " + e.what());
  }
}

BenchConfig parse(const char* text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw ConfigError(std::string("bench config: ") + e.what());
  }
  BenchConfig c;
  std::string dev = field<std::string>(j, "device", "cpu");
  int idx = field<int>(j, "device_index", 0);
  if (dev == "cuda") {
    c.device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(idx));
  } else if (dev != "cpu") {
    throw ConfigError("bench config: device must be cpu or cuda, got \"" + dev + "\"");
  }
  c.threads = field<int>(j, "threads", 0);
  json d = j.contains("dist") ? j.at("dist") : json::object();
  c.dist.rank = field<int>(d, "rank", 0);
  c.dist.world_size = field<int>(d, "world_size", 1);
  c.dist.backend = field<std::string>(d, "backend", "");
  c.dist.store_addr = field<std::string>(d, "store_addr", "");
  c.dist.store_port = field<int>(d, "store_port", 0);
  c.dist.nccl_id_hex = field<std::string>(d, "nccl_id", "");
  int timeout = field<int>(d, "timeout_ms", 0);
  if (timeout > 0) c.dist.timeout_ms = timeout;
  c.sizes = field<std::vector<int64_t>>(j, "sizes", {});
  c.iters = field<int>(j, "iters", 20);
  c.warmup = field<int>(j, "warmup", 5);
  if (c.sizes.empty()) throw ConfigError("bench config: sizes is empty");
  for (int64_t s : c.sizes) {
    if (s < 4) throw ConfigError("bench config: size " + std::to_string(s) + " is below 4 bytes (one fp32)");
  }
  if (c.iters < 1 || c.warmup < 0) throw ConfigError("bench config: iters must be >= 1 and warmup >= 0");
  return c;
}

json run(const BenchConfig& c) {
  if (c.threads > 0) torch::set_num_threads(c.threads);
  auto comm = make_communicator(c.dist, c.device);
  auto opts = torch::TensorOptions().dtype(torch::kFloat).device(c.device);
  double n = comm->world_size();
  json results = json::array();
  for (int64_t bytes : c.sizes) {
    int64_t count = bytes / 4;
    torch::Tensor t = torch::full({count}, static_cast<double>(comm->rank() + 1), opts);
    comm->all_reduce_sum(t)->wait();
    double want = n * (n + 1) / 2;
    // Every rank learns whether any rank saw a wrong sum, so all stop together.
    torch::Tensor bad = t.ne(want).any().to(torch::kFloat).reshape({1});
    comm->all_reduce_sum(bad)->wait();
    if (bad.item<double>() != 0) {
      throw CommError("bench: all-reduce of " + std::to_string(count * 4) + " bytes gave a wrong sum on " +
                      std::to_string(static_cast<int>(bad.item<double>())) + " rank(s) (want " +
                      std::to_string(want) + " everywhere)");
    }
    t.zero_();  // zeros stay zeros: timing never sees inf or denormals
    for (int i = 0; i < c.warmup; ++i) comm->all_reduce_sum(t)->wait();
    comm->barrier();
    std::vector<double> ms;
    for (int i = 0; i < c.iters; ++i) {
      auto w = comm->all_reduce_sum(t);
      w->wait();
      ms.push_back(w->elapsed_ms());
    }
    results.push_back({{"bytes", count * 4}, {"count", count}, {"ms", ms}});
  }
  comm->barrier();
  return {{"backend", comm->backend()}, {"version", comm->version()}, {"world_size", comm->world_size()},
          {"rank", comm->rank()}, {"device", c.device.str()}, {"results", results}};
}

}  // namespace

json bench_allreduce(const char* config_json) { return run(parse(config_json)); }

}  // namespace cs
