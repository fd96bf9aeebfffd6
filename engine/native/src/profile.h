// profile.h: cs_profile's work (profile.cpp): a few more training steps under
// libtorch's own profiler, reduced to per-kernel totals, the device's busy time
// and each kernel's overlap with other streams, plus a Chrome trace file.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>

namespace cs {

class Trainer;

struct ProfileRequest {
  int steps = 3;           // training steps run under the profiler
  std::string trace_path;  // Chrome/Perfetto trace written here ("" = none)
};

// Parses cs_profile's request JSON {"steps":N,"trace_path":"..."}; ConfigError
// names the bad field.
ProfileRequest parse_profile_request(const std::string& json);

// Runs req.steps steps of t under the profiler and returns the raw profile
// (docs/engine.md, "cs_profile"). On CUDA builds the kernels are CUDA kernels,
// copies and memsets (Kineto/CUPTI); on a CPU device the CPU operators' self
// times. A trace that cannot be written is reported in trace_error, not thrown.
nlohmann::json profile_steps(Trainer& t, const ProfileRequest& req);

// The largest profile answer cs_profile hands out (8 MiB; a profile is a few KiB
// to a few hundred KiB).
constexpr size_t kProfileLimit = 8u << 20;

// The profile as JSON text of at most limit bytes: the smallest kernels are
// dropped (counted in kernels_dropped, their time in dropped_ms) until it fits.
std::string dump_profile(nlohmann::json j, size_t limit);

}  // namespace cs
