// profile.cpp: cs_profile. After a launch's measured steps the engine runs a
// few more under libtorch's own profiler (the Kineto API: CUPTI kernels on CUDA
// builds; on a libtorch without Kineto, Debian's 1.13, the same API still
// records CPU operators) and reduces the events to raw facts:
//   - per kernel name (CUDA kernels, copies and memsets; on a CPU device the
//     CPU operators' self times): calls, time, and the time it ran while
//     another stream (CPU: thread) was busy: a collective's overlap;
//   - the device's busy time: the union of those intervals over all streams;
//   - each profiled step's host wall time and the engine's own step_ms.
// Categories, idle shares and top kernels are the Go side's (package
// profile), from these totals. A Chrome/Perfetto trace goes to trace_path:
// Kineto's own where this libtorch has Kineto, else one written here from the
// same events; both through a temporary file renamed into place.
#include "profile.h"

#include <ATen/record_function.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "compat.h"
#include "device.h"
#include "model.h"
#include "profile_spans.h"
#include "trainer.h"

namespace cs {
namespace {

using json = nlohmann::json;
namespace kprof = torch::autograd::profiler;
namespace pimpl = torch::profiler::impl;
using Clock = std::chrono::steady_clock;

constexpr size_t kNameMax = 1000;          // characters of a kernel name returned
const char kStepPrefix[] = "ProfilerStep#";  // torch.profiler's step annotation

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

struct Total {
  std::string name;
  int64_t calls = 0;
  double ns = 0;
};

// Disables the profiler if a step throws while it is on.
struct ProfilerOn {
  bool on = false;
  ~ProfilerOn() {
    if (!on) return;
    try {
      kprof::disableProfiler();
    } catch (...) {
    }
  }
};

// A Chrome trace of every event, for a libtorch whose ProfilerResult cannot
// save one (built without Kineto). Times in microseconds from the first event.
void write_engine_trace(const std::string& path, const std::vector<kprof::KinetoEvent>& evs,
                        const json& meta) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw std::runtime_error("cannot create " + path);
  uint64_t t0 = UINT64_MAX;
  for (const auto& e : evs) t0 = std::min(t0, compat::event_start_ns(e, 0));
  f << "{\"traceEvents\":[\n";
  f << json{{"name", "process_name"}, {"ph", "M"}, {"pid", 0}, {"args", {{"name", "CPU"}}}}.dump();
  f << ",\n"
    << json{{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"args", {{"name", "GPU"}}}}.dump();
  for (const auto& e : evs) {
    const bool gpu = e.deviceType() != c10::DeviceType::CPU;
    json j = {{"name", e.name()},
              {"cat", gpu ? "kernel" : "cpu_op"},
              {"ph", "X"},
              {"ts", double(compat::event_start_ns(e, 0) - t0) / 1e3},
              {"dur", double(compat::event_duration_ns(e, 0)) / 1e3},
              {"pid", gpu ? 1 : 0},
              {"tid", gpu ? int64_t(e.deviceResourceId()) : int64_t(e.startThreadId())}};
    f << ",\n" << j.dump(-1, ' ', false, json::error_handler_t::replace);
  }
  f << "\n],\"displayTimeUnit\":\"ms\",\"otherData\":" << meta.dump() << "}\n";
  f.flush();
  if (!f) throw std::runtime_error("writing " + path + " failed (disk full?)");
}

// Writes the trace through path.tmp; returns its size. Kineto first.
int64_t write_trace(const std::string& path, kprof::ProfilerResult& r, const json& meta,
                    std::string& format, std::string& kineto_error) {
  const std::string tmp = path + ".tmp";
  format = "kineto";
  try {
    r.save(tmp);
  } catch (const c10::Error& e) {  // no Kineto in this libtorch: write our own
    kineto_error = e.what_without_backtrace();
    format = "engine";
    write_engine_trace(tmp, r.events(), meta);
  }
  std::ifstream in(tmp, std::ios::binary | std::ios::ate);
  const int64_t bytes = in ? int64_t(in.tellg()) : -1;
  if (bytes <= 0) {
    std::remove(tmp.c_str());
    throw std::runtime_error("the profiler wrote no trace to " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw std::runtime_error("cannot rename " + tmp + " to " + path);
  }
  return bytes;
}

}  // namespace

ProfileRequest parse_profile_request(const std::string& text) {
  const json j = parse_request("profile request", text, {"steps", "trace_path"});
  ProfileRequest r;
  r.steps = j.value("steps", r.steps);
  r.trace_path = j.value("trace_path", r.trace_path);
  return r;
}

json profile_steps(Trainer& t, const ProfileRequest& req) {
  const torch::Device dev = t.device();
  const bool cuda = dev.is_cuda();
  pimpl::ProfilerConfig cfg(pimpl::ProfilerState::KINETO);
  std::set<pimpl::ActivityType> acts{pimpl::ActivityType::CPU};
  if (cuda) acts.insert(pimpl::ActivityType::CUDA);

  synchronize(dev);
  const auto t0 = Clock::now();
  std::vector<double> wall_ms, step_ms;
  std::unique_ptr<kprof::ProfilerResult> result;
  {
    ProfilerOn on;
    kprof::prepareProfiler(cfg, acts);
    kprof::enableProfiler(cfg, acts);
    on.on = true;
    for (int i = 0; i < req.steps; i++) {
      const auto s0 = Clock::now();
      json m;
      {
        RECORD_USER_SCOPE(kStepPrefix + std::to_string(i));
        m = t.step();
      }
      wall_ms.push_back(ms_since(s0));
      step_ms.push_back(m.value("step_ms", 0.0));
    }
    synchronize(dev);
    on.on = false;
    result = kprof::disableProfiler();
  }
  const double profile_ms = ms_since(t0);
  const auto t1 = Clock::now();
  if (!result) throw std::runtime_error("the profiler returned no result");
  const auto& evs = result->events();

  // What counts as a kernel: on CUDA the device's events, less the GPU mirrors
  // of CPU annotations (a CUDA event named as a CPU one); on the CPU every
  // operator but the step annotations.
  std::unordered_set<std::string> cpu_names;
  if (cuda)
    for (const auto& e : evs)
      if (e.deviceType() == c10::DeviceType::CPU) cpu_names.insert(e.name());
  std::vector<Span> spans;
  std::vector<Total> totals;
  std::unordered_map<std::string, size_t> index;
  for (const auto& e : evs) {
    const bool on_cpu = e.deviceType() == c10::DeviceType::CPU;
    std::string name = e.name();
    if (cuda ? (on_cpu || cpu_names.count(name)) : (!on_cpu || name.rfind(kStepPrefix, 0) == 0))
      continue;
    Span s;
    s.start = compat::event_start_ns(e, 0);
    s.end = s.start + compat::event_duration_ns(e, 0);
    s.lane = on_cpu ? int64_t(e.startThreadId())
                    : (int64_t(e.deviceIndex()) << 32) ^ int64_t(e.deviceResourceId());
    auto it = index.find(name);
    if (it == index.end()) {
      it = index.emplace(name, totals.size()).first;
      totals.push_back(Total{std::move(name)});
    }
    s.kernel = it->second;
    spans.push_back(s);
  }
  if (cuda) {
    for (auto& s : spans) s.self = s.end - s.start;  // kernels do not nest
  } else {
    nest_spans(spans);
  }
  for (const auto& s : spans) {
    totals[s.kernel].calls++;
    totals[s.kernel].ns += double(s.self);
  }
  std::vector<double> overlap_ns(totals.size(), 0.0);
  const double busy_ns = sweep_spans(spans, overlap_ns);
  std::vector<size_t> order(totals.size());
  for (size_t i = 0; i < order.size(); i++) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return totals[a].ns != totals[b].ns ? totals[a].ns > totals[b].ns : totals[a].name < totals[b].name;
  });
  json kernels = json::array();
  for (size_t i : order)
    kernels.push_back({{"name", totals[i].name.substr(0, kNameMax)},
                       {"calls", totals[i].calls},
                       {"ms", totals[i].ns / 1e6},
                       {"overlap_ms", overlap_ns[i] / 1e6}});

  json out = {{"steps", req.steps},
              {"device", cuda ? "cuda" : "cpu"},
              {"torch", compat::torch_version()},
              {"events", int64_t(evs.size())},
              {"wall_ms", wall_ms},
              {"step_ms", step_ms},
              {"busy_ms", busy_ns / 1e6},
              {"kernels", kernels},
              {"profile_ms", profile_ms}};
  const double analysis_ms = ms_since(t1);
  if (!req.trace_path.empty()) {
    const auto t2 = Clock::now();
    std::string format, kineto_error;
    try {
      json meta = {{"writer", "casestudy engine (libtorch without Kineto)"},
                   {"torch", compat::torch_version()},
                   {"steps", req.steps}};
      out["trace_bytes"] = write_trace(req.trace_path, *result, meta, format, kineto_error);
      out["trace_path"] = req.trace_path;
      out["trace_format"] = format;
      if (cuda && format != "kineto") out["trace_note"] = kineto_error;
    } catch (const std::exception& e) {
      out["trace_error"] = e.what();
    }
    out["trace_ms"] = ms_since(t2);
  }
  out["analysis_ms"] = analysis_ms;
  return out;
}

std::string dump_profile(json j, size_t limit) {
  std::string s = j.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() <= limit || !j.contains("kernels")) return s;
  auto& ks = j["kernels"];  // sorted by time: the smallest are last
  int64_t dropped = 0;
  double dropped_ms = 0;
  while (s.size() > limit && !ks.empty()) {
    const size_t n = std::max<size_t>(1, ks.size() / 8);
    for (size_t i = 0; i < n && !ks.empty(); i++) {
      dropped_ms += ks.back().value("ms", 0.0);
      dropped++;
      ks.erase(ks.size() - 1);
    }
    j["kernels_dropped"] = dropped;
    j["dropped_ms"] = dropped_ms;
    s = j.dump(-1, ' ', false, json::error_handler_t::replace);
  }
  return s;
}

}  // namespace cs
