// capi.cpp: the C ABI (include/casestudy_engine.h). Every exported function is
// noexcept and runs its body in guarded(), which maps every exception to a
// status and a message; nothing is thrown across. Answers and messages are
// strings the engine allocates with malloc and the caller frees with cs_free.
#include "casestudy_engine.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <cstring>
#include <new>

#include "comm_watch.h"
#include "compat.h"
#include "config.h"
#include "device.h"
#include "dist.h"
#include "loaded_libs.h"
#include "profile.h"
#include "trainer.h"

#ifdef CS_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <cuda.h>
#endif
#ifdef CS_WITH_NCCL
#include <nccl.h>
#endif

struct cs_engine {
  std::unique_ptr<cs::Trainer> trainer;
};

namespace {

using json = nlohmann::json;

// A malloc'd copy of s for the caller (cs_free releases it); NULL when even
// that allocation fails.
char* copy_out(const std::string& s) noexcept {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p != nullptr) std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

// Hands s to the caller in *out; std::bad_alloc (CS_ERR_OOM) when it cannot.
cs_status put_text(const std::string& s, char** out) {
  if (out == nullptr) throw std::invalid_argument("out is NULL");
  *out = copy_out(s);
  if (*out == nullptr) throw std::bad_alloc();
  return CS_OK;
}

cs_status put_json(const json& j, char** out) {
  return put_text(j.dump(-1, ' ', false, json::error_handler_t::replace), out);
}

// Runs f, mapping every exception to a status and *err (when err is not NULL).
template <typename F>
cs_status guarded(char** err, F&& f) noexcept {
  auto fail = [err](cs_status st, const std::string& msg) noexcept {
    if (err != nullptr) *err = copy_out(msg);
    return st;
  };
  if (err != nullptr) *err = nullptr;
  try {
    return f();
  } catch (const cs::ConfigError& e) {
    return fail(CS_ERR_CONFIG, e.what());
  } catch (const cs::UnsupportedError& e) {
    return fail(CS_ERR_UNSUPPORTED, e.what());
  } catch (const cs::OOMError& e) {
    return fail(CS_ERR_OOM, e.what());
  } catch (const cs::CommError& e) {
    return fail(CS_ERR_COMM, e.what());
  } catch (const c10::OutOfMemoryError& e) {
    return fail(CS_ERR_OOM, e.what_without_backtrace());
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    return fail(cs::is_oom_text(what) ? CS_ERR_OOM : CS_ERR_RUNTIME, what);
  } catch (const std::bad_alloc&) {
    return fail(CS_ERR_OOM, "out of host memory (std::bad_alloc)");
  } catch (const std::exception& e) {
    return fail(cs::is_oom_text(e.what()) ? CS_ERR_OOM : CS_ERR_RUNTIME, e.what());
  } catch (...) {
    return fail(CS_ERR_RUNTIME, "unknown C++ exception");
  }
}

// The engine of an ABI call; *out is NULL until the call succeeds.
cs::Trainer& trainer(cs_engine* e, char** out, const char* op) {
  if (out != nullptr) *out = nullptr;
  if (e == nullptr) throw std::invalid_argument(std::string(op) + ": engine is NULL");
  return *e->trainer;
}

std::string cuda_version() {
#ifdef CS_WITH_CUDA
  return std::to_string(CUDA_VERSION / 1000) + "." + std::to_string((CUDA_VERSION % 1000) / 10);
#else
  return "";
#endif
}

std::string nccl_version() {
#ifdef CS_WITH_NCCL
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "";
  // 2.9 and later: major*10000 + minor*100 + patch.
  const int major = v >= 10000 ? v / 10000 : v / 1000;
  const int minor = v >= 10000 ? (v / 100) % 100 : (v / 100) % 10;
  const int patch = v % 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
#else
  return "";
#endif
}

std::string cudnn_version() {
#ifdef CS_WITH_CUDA
  if (at::detail::getCUDAHooks().hasCuDNN())
    return std::to_string(at::detail::getCUDAHooks().versionCuDNN());
#endif
  return "";
}

}  // namespace

extern "C" {

int cs_abi_version(void) noexcept { return CS_ABI_VERSION; }

void cs_free(char* s) noexcept { std::free(s); }

cs_status cs_build_info(char** out, char** err) noexcept {
  return guarded(err, [&] {
    json j = {{"abi", CS_ABI_VERSION},
              {"torch", cs::compat::torch_version()},
              {"cuda", cuda_version()},
              {"nccl", nccl_version()},
              {"cudnn", cudnn_version()},
              {"cudnn_runtime", cs::cudnn_runtime_version()},
              {"libraries", cs::loaded_libraries()},
#ifdef CS_WITH_GLOO
              {"gloo", true},
#else
              {"gloo", false},
#endif
              {"cuda_available", torch::cuda::is_available()},
              {"device_count", int(torch::cuda::device_count())},
              {"sdpa", bool(CS_HAS_SDPA)},
              {"fused_adamw", bool(CS_HAS_FUSED_ADAMW)}};
    return put_json(j, out);
  });
}

cs_status cs_models(char** out, char** err) noexcept {
  return guarded(err, [&] {
    json fams = json::array();
    for (const auto& name : cs::family_names())
      fams.push_back({{"family", name}, {"presets", cs::family(name).presets}});
    return put_json({{"families", fams}}, out);
  });
}

cs_status cs_describe(const char* config_json, char** out, char** err) noexcept {
  return guarded(err, [&] {
    if (out != nullptr) *out = nullptr;
    if (!config_json) throw cs::ConfigError("config is NULL");
    const cs::EngineConfig c = cs::parse_config(config_json, /*model_only=*/true);
    return put_json(cs::describe_json(c.model), out);
  });
}

cs_status cs_create(const char* config_json, cs_engine** out, char** err) noexcept {
  if (out) *out = nullptr;
  return guarded(err, [&] {
    if (!config_json) throw cs::ConfigError("config is NULL");
    if (!out) throw cs::ConfigError("cs_create: out is NULL");
    const cs::EngineConfig c = cs::parse_config(config_json);
    auto e = std::make_unique<cs_engine>();
    e->trainer = std::make_unique<cs::Trainer>(c);
    *out = e.release();
    return CS_OK;
  });
}

cs_status cs_info(cs_engine* e, char** out, char** err) noexcept {
  return guarded(err, [&] { return put_json(trainer(e, out, "cs_info").info(), out); });
}

cs_status cs_step(cs_engine* e, char** out, char** err) noexcept {
  return guarded(err, [&] { return put_json(trainer(e, out, "cs_step").step(), out); });
}

cs_status cs_steps(cs_engine* e, const char* request_json, char** out, char** err) noexcept {
  return guarded(err, [&] {
    cs::Trainer& t = trainer(e, out, "cs_steps");
    if (!request_json) throw cs::ConfigError("cs_steps: request is NULL");
    const json j = cs::parse_request("steps request", request_json, {"steps"});
    if (!j.contains("steps")) throw cs::ConfigError("steps request: expected {\"steps\": n}");
    return put_json(t.steps(j["steps"].get<int>()), out);
  });
}

cs_status cs_param_checksum(cs_engine* e, char** out, char** err) noexcept {
  return guarded(err, [&] {
    return put_json(trainer(e, out, "cs_param_checksum").checksum(), out);
  });
}

cs_status cs_nccl_unique_id(char** out, char** err) noexcept {
  return guarded(err, [&] {
    if (out != nullptr) *out = nullptr;
    return put_text(cs::nccl_unique_id_hex(), out);
  });
}

cs_status cs_bench_allreduce(const char* config_json, char** out, char** err) noexcept {
  return guarded(err, [&] {
    if (out != nullptr) *out = nullptr;
    if (!config_json) throw cs::ConfigError("bench config: NULL");
    return put_json(cs::bench_allreduce(config_json), out);
  });
}

cs_status cs_comm_progress(char** out, char** err) noexcept {
  return guarded(err, [&] {
    if (out != nullptr) *out = nullptr;
    return put_json(cs::commwatch::progress_json(), out);
  });
}

cs_status cs_set_comm_timeout(const char* request_json, char** out, char** err) noexcept {
  return guarded(err, [&] {
    if (out != nullptr) *out = nullptr;
    if (!request_json) throw cs::ConfigError("cs_set_comm_timeout: request is NULL");
    json j;
    try {
      j = json::parse(request_json);
    } catch (const json::exception& ex) {
      throw cs::ConfigError(std::string("comm timeout request: ") + ex.what());
    }
    if (!j.is_object() || j.size() != 1 || !j.contains("timeout_ms") || !j["timeout_ms"].is_number_integer())
      throw cs::ConfigError("comm timeout request: expected {\"timeout_ms\": n} with n ≥ 1");
    const int64_t ms = j["timeout_ms"].get<int64_t>();
    if (ms < 1 || ms > 24LL * 3600 * 1000)
      throw cs::ConfigError("comm timeout request: timeout_ms " + std::to_string(ms) +
                            " is out of range 1..86400000");
    cs::commwatch::set_deadline_ms(int(ms));
    return put_json({{"timeout_ms", cs::commwatch::deadline_ms()}}, out);
  });
}

cs_status cs_profile(cs_engine* e, const char* request_json, char** out, char** err) noexcept {
  return guarded(err, [&] {
    cs::Trainer& t = trainer(e, out, "cs_profile");
    if (!request_json) throw cs::ConfigError("cs_profile: request is NULL");
    const cs::ProfileRequest req = cs::parse_profile_request(request_json);
    // The answer is capped (the smallest kernels are dropped past kProfileLimit)
    // so that a pathological profile cannot grow the record without bound.
    return put_text(cs::dump_profile(cs::profile_steps(t, req), cs::kProfileLimit), out);
  });
}

cs_status cs_destroy(cs_engine* e, char** err) noexcept {
  std::unique_ptr<cs_engine> owned(e);  // freed whatever the teardown says
  return guarded(err, [&] {
    if (owned) owned->trainer->close();
    owned.reset();
    return CS_OK;
  });
}

}  // extern "C"
