// bench_comm.cpp: bench_allreduce (cs_bench_allreduce in capi.cpp), the
// project's all-reduce microbenchmark on the same Communicator the reducer uses
// (`casestudy bench allreduce`).
//
// Config JSON: {"device":"cpu|cuda","device_index":0,"threads":0,
//   "dist":{...as the engine config...},"sizes":[bytes,...],"iters":20,"warmup":5,
//   "mode":"sync|nccl-tests"}
// Output JSON: {"backend","version","world_size","rank","device","mode",
//   "results":[{"bytes":N,"count":N,"ms":[per timed iteration],"avg_ms":x}]}
// Every rank runs the same sequence; each size is checked once for a correct
// sum before it is timed. Mode sync (the default): each iteration is one
// all-reduce timed on the communication stream (CUDA events / host clock of
// the Gloo call) and the host waits for it before the next ("ms"). Mode
// nccl-tests, as nccl-tests times (doc/PERFORMANCE.md): after a barrier the
// iterations are issued back to back, the host waits once, after the last, and
// avg_ms is the host time of the loop over iters ("ms" is empty).
//
// "compute_pairs": P > 0 (CPU, sync mode) also measures what a collective
// costs the compute beside it (docs/predict.md, "Collectives slow the
// backward"): per size, P pairs of the same compute loop on this thread (fp32
// matmuls with the rank's threads, about as long as kLoopMS or 3 x the
// collectives), once alone and once beside M all-reduces of the size that
// the computing thread queues on the communicator spread evenly over the loop
// (as the backward's hooks queue buckets). Every rank runs its loops at once,
// after a barrier, as the ranks of a step compute at once. "compute": {"collectives": M,
// "reps", "alone_ms", "beside_ms", "comm_ms"} (per pair; comm_ms the M
// collectives' summed host time on the queue's thread).
#include <algorithm>
#include <chrono>

#include "comm_watch.h"
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
  std::string mode = "sync";  // sync | nccl-tests
  int compute_pairs = 0;      // > 0: the compute loop alone and beside the collectives, per size
};

// The compute loop's length and the most collectives queued beside it.
constexpr double kLoopMS = 150;
constexpr int kMaxCollectives = 256;

double since_ms(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The compute beside the collectives: reps fp32 matmuls on this thread.
struct ComputeLoop {
  torch::Tensor a = torch::rand({256, 256}), b = torch::rand({256, 512}), out = torch::empty({256, 512});
  // issue(k) is called before rep k * reps / m for k = 0..m-1 (m > 0): the
  // collectives spread over the loop, issued by the computing thread.
  template <typename Issue>
  double run(int reps, int m, Issue issue) {
    const auto t0 = std::chrono::steady_clock::now();
    int k = 0;
    for (int i = 0; i < reps; ++i) {
      for (; k < m && static_cast<int64_t>(k) * reps <= static_cast<int64_t>(i) * m; ++k) issue(k);
      torch::mm_out(out, a, b);
    }
    for (; k < m; ++k) issue(k);  // every rank issues all m (with m > reps some are left here)
    return since_ms(t0);
  }
  double run(int reps) {
    return run(reps, 0, [](int) {});
  }
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
  c.mode = field<std::string>(j, "mode", "sync");
  c.compute_pairs = field<int>(j, "compute_pairs", 0);
  if (c.compute_pairs < 0) throw ConfigError("bench config: compute_pairs must be >= 0");
  if (c.compute_pairs > 0 && (c.device != torch::kCPU || c.mode != "sync"))
    throw ConfigError("bench config: compute_pairs needs device cpu and mode sync");
  if (c.mode != "sync" && c.mode != "nccl-tests")
    throw ConfigError("bench config: mode must be sync or nccl-tests, got \"" + c.mode + "\"");
  if (c.sizes.empty()) throw ConfigError("bench config: sizes is empty");
  for (int64_t s : c.sizes) {
    if (s < 4) throw ConfigError("bench config: size " + std::to_string(s) + " is below 4 bytes (one fp32)");
  }
  if (c.iters < 1 || c.warmup < 0) throw ConfigError("bench config: iters must be >= 1 and warmup >= 0");
  return c;
}

// The compute loop alone and beside m all-reduces of t, pairs times (the
// header's "compute_pairs"); every rank calls it with the same m.
json compute_beside(Communicator& comm, torch::Tensor& t, ComputeLoop& loop, int reps, int m, int pairs) {
  json alone = json::array(), beside = json::array(), comm_ms = json::array();
  for (int p = 0; p < pairs; ++p) {
    for (int k = 0; k < 2; ++k) {
      bool with = (k == 1) != (p % 2 == 1);  // alone first in even pairs, beside first in odd: drift cancels
      comm.barrier();
      if (!with) {
        alone.push_back(loop.run(reps));
        continue;
      }
      std::vector<std::shared_ptr<CommWork>> works;
      beside.push_back(loop.run(reps, m, [&](int) { works.push_back(comm.all_reduce_sum(t)); }));
      double sum = 0;
      for (auto& w : works) sum += w->elapsed_ms();  // waits for each
      comm_ms.push_back(sum);
    }
  }
  return {{"collectives", m}, {"reps", reps}, {"alone_ms", alone}, {"beside_ms", beside}, {"comm_ms", comm_ms}};
}

json run(const BenchConfig& c) {
  if (c.threads > 0) torch::set_num_threads(c.threads);
  commwatch::reset();
  commwatch::set_deadline_ms(c.dist.timeout_ms);
  auto comm = make_communicator(c.dist, c.device);
  auto opts = torch::TensorOptions().dtype(torch::kFloat).device(c.device);
  double n = comm->world_size();
  json results = json::array();
  ComputeLoop loop;
  int reps = 0;
  if (c.compute_pairs > 0) {  // reps for a loop of about kLoopMS, every rank computing at once
    comm->barrier();
    loop.run(2);
    double one = std::max(loop.run(8) / 8, 1e-3);
    reps = std::max(1, static_cast<int>(kLoopMS / one));
  }
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
    double avg_ms = 0;
    if (c.mode == "nccl-tests") {
      // Back to back: the ranks' arrival skew is paid once, not per iteration.
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<std::shared_ptr<CommWork>> works;
      for (int i = 0; i < c.iters; ++i) works.push_back(comm->all_reduce_sum(t));
      for (auto& w : works) w->wait();
      works.back()->elapsed_ms();  // the host's one wait: the last is done, so are the others
      const auto t1 = std::chrono::steady_clock::now();
      avg_ms = std::chrono::duration<double, std::milli>(t1 - t0).count() / c.iters;
    } else {
      for (int i = 0; i < c.iters; ++i) {
        auto w = comm->all_reduce_sum(t);
        w->wait();
        ms.push_back(w->elapsed_ms());
        avg_ms += ms.back() / c.iters;
      }
    }
    json row = {{"bytes", count * 4}, {"count", count}, {"ms", ms}, {"avg_ms", avg_ms}};
    if (c.compute_pairs > 0) {
      // M from the ranks' mean collective time (all-reduced: every rank queues
      // the same M): about a third of the loop alone, 1 to kMaxCollectives.
      std::vector<double> sorted = ms;
      std::sort(sorted.begin(), sorted.end());
      torch::Tensor med = torch::full({1}, sorted[sorted.size() / 2] / n, torch::kFloat);
      comm->all_reduce_sum(med)->wait();
      double per = std::max(med.item<double>(), 1e-3);
      int m = static_cast<int>(std::clamp(kLoopMS / (3 * per), 1.0, static_cast<double>(kMaxCollectives)));
      // The loop at least 3x the collectives' time alone (at most 20x kLoopMS).
      int r = std::clamp(static_cast<int>(reps * (3 * m * per) / kLoopMS), reps, 20 * reps);
      row["compute"] = compute_beside(*comm, t, loop, r, m, c.compute_pairs);
    }
    results.push_back(row);
  }
  comm->barrier();
  return {{"backend", comm->backend()}, {"version", comm->version()}, {"world_size", comm->world_size()},
          {"rank", comm->rank()}, {"device", c.device.str()}, {"mode", c.mode}, {"results", results}};
}

}  // namespace

json bench_allreduce(const char* config_json) { return run(parse(config_json)); }

}  // namespace cs
