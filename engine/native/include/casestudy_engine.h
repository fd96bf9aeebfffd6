/* casestudy_engine.h: the C ABI of libcasestudy_engine.so.
 *
 * The Go binary loads the library with dlopen and calls only these functions.
 * Rules every function follows:
 *   - returns a cs_status; CS_OK (0) on success;
 *   - on failure writes a NUL-terminated message into err (at most err_len bytes);
 *   - never lets a C++ exception or an abort cross the boundary;
 *   - JSON in, JSON out: configuration and metrics are UTF-8 JSON documents.
 * Bump CS_ABI_VERSION on any incompatible change; the Go side refuses a mismatch.
 */
#ifndef CASESTUDY_ENGINE_H
#define CASESTUDY_ENGINE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library is compiled with hidden visibility; these declarations are its
 * exports (exports.map keeps only cs_* in the dynamic symbol table). */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#define CS_ABI_VERSION 1

typedef enum cs_status {
  CS_OK = 0,
  CS_ERR_CONFIG = 1,      /* the config JSON is malformed or a value is out of range */
  CS_ERR_UNSUPPORTED = 2, /* a knob cannot be honoured here (e.g. graphs on CPU) */
  CS_ERR_OOM = 3,         /* the device allocator ran out of memory */
  CS_ERR_COMM = 4,        /* a collective failed or timed out (NCCL/Gloo text kept) */
  CS_ERR_RUNTIME = 5,     /* anything else thrown by torch or the engine */
  CS_ERR_BUFFER = 6       /* the output buffer is too small; retry with a larger one */
} cs_status;

typedef struct cs_engine cs_engine; /* opaque */

/* The ABI version the library was built with (CS_ABI_VERSION). */
int cs_abi_version(void);

/* Build facts as JSON: {"abi":1,"torch":"2.11.0","cuda":"13.0","nccl":"2.28.9",
 * "cudnn":"91900","gloo":true,"cuda_available":true,"device_count":1}. */
cs_status cs_build_info(char *out, size_t out_len, char *err, size_t err_len);

/* Every model family the library has and its presets, as JSON:
 * {"families":[{"family":"gpt","presets":["tiny","124m",...]}, ...]}.
 * Added after ABI 1 shipped: probe for the symbol (dlsym) before calling it. */
cs_status cs_models(char *out, size_t out_len, char *err, size_t err_len);

/* Static facts of a model without building a training engine (no device memory):
 * {"family","preset","params","flops_per_sample","tokens_per_sample", "shapes":{...}}.
 * config_json is an engine config (only model fields are read). */
cs_status cs_describe(const char *config_json, char *out, size_t out_len, char *err,
                      size_t err_len);

/* Creates an engine (model, optimizer, data, communicator) from a JSON config. */
cs_status cs_create(const char *config_json, cs_engine **out, char *err, size_t err_len);

/* Static facts of a created engine as JSON: the cs_describe fields plus device,
 * device_name, precision, world_size, rank, memory after setup. */
cs_status cs_info(cs_engine *e, char *out, size_t out_len, char *err, size_t err_len);

/* Runs one training step (grad_accum micro-batches + optimizer) and writes its
 * metrics as one JSON object (see docs/engine.md for the fields). */
cs_status cs_step(cs_engine *e, char *metrics_out, size_t out_len, char *err, size_t err_len);

/* Runs more training steps under libtorch's profiler (after the measured ones;
 * never during them) and writes what they spent their time on, as JSON:
 * {"steps","device","torch","events","wall_ms":[per step],"step_ms":[per step],
 *  "busy_ms","kernels":[{"name","calls","ms","overlap_ms"}],"profile_ms","analysis_ms",
 *  "trace_path","trace_format","trace_bytes","trace_ms","trace_error"} (docs/engine.md).
 * request_json: {"steps":3,"trace_path":"/abs/rank0.r0.trace.json"} (trace_path ""
 * writes none). Every rank of a data-parallel or pipelined engine must call it with
 * the same steps. out_len below 4096 is CS_ERR_BUFFER before anything runs; a profile
 * larger than out_len drops its smallest kernels ("kernels_dropped"), so the
 * caller never retries. Added after ABI 1 shipped: probe for the symbol (dlsym). */
cs_status cs_profile(cs_engine *e, const char *request_json, char *out, size_t out_len,
                     char *err, size_t err_len);

/* A checksum of all parameters (sum of float64 values and a bitwise hash), for
 * cross-rank equality checks: {"sum":..., "hash":"hex"}. */
cs_status cs_param_checksum(cs_engine *e, char *out, size_t out_len, char *err, size_t err_len);

/* Writes a new NCCL unique id as 256 hex characters (rank 0 calls it and the
 * runner's rendezvous hands it to every rank). CS_ERR_UNSUPPORTED without NCCL. */
cs_status cs_nccl_unique_id(char *out, size_t out_len, char *err, size_t err_len);

/* The all-reduce microbenchmark on the engine's communicator (bench_comm.cpp).
 * config_json: {"device":"cpu|cuda","device_index":0,"threads":0,"dist":{as the engine
 * config},"sizes":[bytes,...],"iters":20,"warmup":5}. Every rank of the world calls it
 * with the same sizes. Writes {"backend","version","world_size","rank","device",
 * "results":[{"bytes","count","ms":[one per timed iteration]}]}. Answers CS_ERR_BUFFER
 * before running anything when out_len cannot hold the result. */
cs_status cs_bench_allreduce(const char *config_json, char *out, size_t out_len, char *err,
                             size_t err_len);

/* Frees everything; safe on NULL. Returns CS_OK or the error of an orderly teardown. */
cs_status cs_destroy(cs_engine *e, char *err, size_t err_len);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* CASESTUDY_ENGINE_H */
