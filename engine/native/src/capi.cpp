// capi.cpp: the C ABI (include/casestudy_engine.h). Every function catches
// everything and maps it to a status and a message; nothing is thrown across.
#include "casestudy_engine.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <new>

#include "compat.h"
#include "config.h"
#include "device.h"
#include "dist.h"
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

void put(char* buf, size_t len, const std::string& s) {
  if (!buf || len == 0) return;
  const size_t n = std::min(len - 1, s.size());
  std::memcpy(buf, s.data(), n);
  buf[n] = '\0';
}

// Writes a JSON document into out, or reports that out is too small.
cs_status put_json(const json& j, char* out, size_t out_len, char* err, size_t err_len) {
  const std::string s = j.dump(-1, ' ', false, json::error_handler_t::replace);
  if (!out || s.size() + 1 > out_len) {
    put(err, err_len,
        "output buffer too small: need " + std::to_string(s.size() + 1) + " bytes, have " +
            std::to_string(out ? out_len : 0));
    return CS_ERR_BUFFER;
  }
  std::memcpy(out, s.data(), s.size() + 1);
  return CS_OK;
}

// Runs f, mapping every exception to a status and message.
template <typename F>
cs_status guarded(char* err, size_t err_len, F&& f) {
  try {
    return f();
  } catch (const cs::ConfigError& e) {
    put(err, err_len, e.what());
    return CS_ERR_CONFIG;
  } catch (const cs::UnsupportedError& e) {
    put(err, err_len, e.what());
    return CS_ERR_UNSUPPORTED;
  } catch (const cs::OOMError& e) {
    put(err, err_len, e.what());
    return CS_ERR_OOM;
  } catch (const cs::CommError& e) {
    put(err, err_len, e.what());
    return CS_ERR_COMM;
  } catch (const c10::OutOfMemoryError& e) {
    put(err, err_len, e.what_without_backtrace());
    return CS_ERR_OOM;
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    put(err, err_len, what);
    return cs::is_oom_text(what) ? CS_ERR_OOM : CS_ERR_RUNTIME;
  } catch (const std::bad_alloc&) {
    put(err, err_len, "out of host memory (std::bad_alloc)");
    return CS_ERR_OOM;
  } catch (const std::exception& e) {
    put(err, err_len, e.what());
    return cs::is_oom_text(e.what()) ? CS_ERR_OOM : CS_ERR_RUNTIME;
  } catch (...) {
    put(err, err_len, "unknown C++ exception");
    return CS_ERR_RUNTIME;
  }
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

int cs_abi_version(void) { return CS_ABI_VERSION; }

cs_status cs_build_info(char* out, size_t out_len, char* err, size_t err_len) {
  return guarded(err, err_len, [&] {
    json j = {{"abi", CS_ABI_VERSION},
              {"torch", cs::compat::torch_version()},
              {"cuda", cuda_version()},
              {"nccl", nccl_version()},
              {"cudnn", cudnn_version()},
#ifdef CS_WITH_GLOO
              {"gloo", true},
#else
              {"gloo", false},
#endif
              {"cuda_available", torch::cuda::is_available()},
              {"device_count", int(torch::cuda::device_count())},
              {"sdpa", bool(CS_HAS_SDPA)},
              {"fused_adamw", bool(CS_HAS_FUSED_ADAMW)}};
    return put_json(j, out, out_len, err, err_len);
  });
}

cs_status cs_models(char* out, size_t out_len, char* err, size_t err_len) {
  return guarded(err, err_len, [&] {
    json fams = json::array();
    for (const auto& name : cs::family_names())
      fams.push_back({{"family", name}, {"presets", cs::family(name).presets}});
    return put_json({{"families", fams}}, out, out_len, err, err_len);
  });
}

cs_status cs_describe(const char* config_json, char* out, size_t out_len, char* err,
                      size_t err_len) {
  return guarded(err, err_len, [&] {
    if (!config_json) throw cs::ConfigError("config is NULL");
    const cs::EngineConfig c = cs::parse_config(config_json, /*model_only=*/true);
    return put_json(cs::describe_json(c.model), out, out_len, err, err_len);
  });
}

cs_status cs_create(const char* config_json, cs_engine** out, char* err, size_t err_len) {
  if (out) *out = nullptr;
  return guarded(err, err_len, [&] {
    if (!config_json) throw cs::ConfigError("config is NULL");
    if (!out) throw cs::ConfigError("cs_create: out is NULL");
    const cs::EngineConfig c = cs::parse_config(config_json);
    auto e = std::make_unique<cs_engine>();
    e->trainer = std::make_unique<cs::Trainer>(c);
    *out = e.release();
    return CS_OK;
  });
}

cs_status cs_info(cs_engine* e, char* out, size_t out_len, char* err, size_t err_len) {
  return guarded(err, err_len, [&] {
    if (!e) throw std::invalid_argument("cs_info: engine is NULL");
    return put_json(e->trainer->info(), out, out_len, err, err_len);
  });
}

cs_status cs_step(cs_engine* e, char* metrics_out, size_t out_len, char* err, size_t err_len) {
  return guarded(err, err_len, [&] {
    if (!e) throw std::invalid_argument("cs_step: engine is NULL");
    return put_json(e->trainer->step(), metrics_out, out_len, err, err_len);
  });
}

cs_status cs_profile(cs_engine* e, const char* request_json, char* out, size_t out_len, char* err,
                     size_t err_len) {
  return guarded(err, err_len, [&] {
    if (!e) throw std::invalid_argument("cs_profile: engine is NULL");
    if (!request_json) throw cs::ConfigError("cs_profile: request is NULL");
    if (!out || out_len < 4096) {  // refused before any step runs
      put(err, err_len, "cs_profile: output buffer of " + std::to_string(out ? out_len : 0) +
                            " bytes; give at least 4096");
      return CS_ERR_BUFFER;
    }
    const cs::ProfileRequest req = cs::parse_profile_request(request_json);
    // The steps ran: the answer fits by dropping the smallest kernels, never
    // by a retry that would run more steps.
    const std::string s = cs::dump_profile(cs::profile_steps(*e->trainer, req), out_len - 1);
    if (s.size() + 1 > out_len) {
      put(err, err_len, "cs_profile: the profile does not fit in " + std::to_string(out_len) + " bytes");
      return CS_ERR_RUNTIME;
    }
    std::memcpy(out, s.data(), s.size() + 1);
    return CS_OK;
  });
}

cs_status cs_param_checksum(cs_engine* e, char* out, size_t out_len, char* err, size_t err_len) {
  return guarded(err, err_len, [&] {
    if (!e) throw std::invalid_argument("cs_param_checksum: engine is NULL");
    return put_json(e->trainer->checksum(), out, out_len, err, err_len);
  });
}

cs_status cs_nccl_unique_id(char* out, size_t out_len, char* err, size_t err_len) {
  return guarded(err, err_len, [&] {
    const std::string id = cs::nccl_unique_id_hex();
    if (!out || id.size() + 1 > out_len) {
      put(err, err_len, "output buffer too small: need " + std::to_string(id.size() + 1) + " bytes");
      return CS_ERR_BUFFER;
    }
    std::memcpy(out, id.c_str(), id.size() + 1);
    return CS_OK;
  });
}

cs_status cs_destroy(cs_engine* e, char* err, size_t err_len) {
  return guarded(err, err_len, [&] {
    delete e;
    return CS_OK;
  });
}

}  // extern "C"
