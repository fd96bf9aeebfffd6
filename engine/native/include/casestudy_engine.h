/* casestudy_engine.h: the C ABI of libcasestudy_engine.so.
 *
 * The Go binary loads the library with dlopen and calls only these functions.
 * Rules every function follows:
 *   - returns a cs_status; CS_OK (0) on success;
 *   - text out is engine-owned: a function that answers text sets *out to a
 *     NUL-terminated UTF-8 string the engine allocated (JSON unless said), of
 *     any length; the caller releases it with cs_free. On failure *out is NULL;
 *   - errors: on failure *err is set to a message the engine allocated (release
 *     it with cs_free), or to NULL when not even that could be allocated; on
 *     success *err is NULL. err may be NULL to ignore the message;
 *   - never lets a C++ exception or an abort cross the boundary (capi.cpp:
 *     every function is noexcept and runs its body in guarded());
 *   - JSON in, JSON out: configuration and metrics are UTF-8 JSON documents.
 * Bump CS_ABI_VERSION on any incompatible change; the Go side refuses a mismatch.
 *
 * Adding a function: declare it here, define it in capi.cpp as
 *   cs_status cs_x(..., char **out, char **err) noexcept {
 *     return guarded(err, [&] { return put_json(cs::x(...), out); });
 *   }
 * with the work in a C++ function elsewhere that returns nlohmann::json and
 * throws (ConfigError, UnsupportedError, OOMError, CommError, anything else)
 * on failure; add its name to abiSymbols in engine/binding/cgo.go and to
 * engine/binding/testdata/fakeabi.c.
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

#define CS_ABI_VERSION 4

/* No exception leaves these functions (C++: noexcept is part of their type). */
#ifdef __cplusplus
#define CS_NOEXCEPT noexcept
#else
#define CS_NOEXCEPT
#endif

typedef enum cs_status {
  CS_OK = 0,
  CS_ERR_CONFIG = 1,      /* the config JSON is malformed or a value is out of range */
  CS_ERR_UNSUPPORTED = 2, /* a knob cannot be honoured here (e.g. graphs on CPU) */
  CS_ERR_OOM = 3,         /* a device or host allocator ran out of memory */
  CS_ERR_COMM = 4,        /* a collective failed or timed out (NCCL/Gloo text kept) */
  CS_ERR_RUNTIME = 5      /* anything else thrown by torch or the engine */
} cs_status;

typedef struct cs_engine cs_engine; /* opaque */

/* The ABI version the library was built with (CS_ABI_VERSION). */
int cs_abi_version(void) CS_NOEXCEPT;

/* Releases a string the engine handed out (*out, *err); safe on NULL. */
void cs_free(char *s) CS_NOEXCEPT;

/* Build facts: {"abi":4,"torch":"2.11.0","cuda":"13.0","nccl":"2.28.9",
 * "cudnn":"91900","gloo":true,"cuda_available":true,"device_count":1,...}. */
cs_status cs_build_info(char **out, char **err) CS_NOEXCEPT;

/* Every model family the library has and its presets:
 * {"families":[{"family":"gpt","presets":["tiny","124m",...]}, ...]}. */
cs_status cs_models(char **out, char **err) CS_NOEXCEPT;

/* Static facts of a model without building a training engine (no device memory):
 * {"family","preset","params","flops_per_sample","tokens_per_sample", "shapes":{...}}.
 * config_json is an engine config (only model fields are read). */
cs_status cs_describe(const char *config_json, char **out, char **err) CS_NOEXCEPT;

/* Creates an engine (model, optimizer, data, communicator) from a JSON config.
 * On failure *out is NULL. */
cs_status cs_create(const char *config_json, cs_engine **out, char **err) CS_NOEXCEPT;

/* Static facts of a created engine: the cs_describe fields plus device,
 * device_name, precision, world_size, rank, memory after setup and the phases
 * of cs_create ("init_phases", docs/engine.md). */
cs_status cs_info(cs_engine *e, char **out, char **err) CS_NOEXCEPT;

/* Runs one training step (grad_accum micro-batches + optimizer); its metrics
 * as one JSON object (see docs/engine.md for the fields). */
cs_status cs_step(cs_engine *e, char **out, char **err) CS_NOEXCEPT;

/* Runs n training steps back to back, request_json {"steps": n} (1..1000), and
 * answers their metrics as a JSON array, one object per step as cs_step's. The
 * host issues each step while the device finishes the one before and waits for
 * the device once, after the last (a training loop that reads its metrics every
 * n steps), so a step's step_ms runs from the previous step's end on the device
 * to its own; the peak memory fields are the whole call's. Data-parallel and
 * pipelined engines wait after each step (their communication times are read
 * as each step ends). */
cs_status cs_steps(cs_engine *e, const char *request_json, char **out, char **err) CS_NOEXCEPT;

/* Runs more training steps under libtorch's profiler (after the measured ones;
 * never during them) and writes what they spent their time on, as JSON:
 * {"steps","device","torch","events","wall_ms":[per step],"step_ms":[per step],
 *  "busy_ms","kernels":[{"name","calls","ms","overlap_ms"}],"profile_ms","analysis_ms",
 *  "trace_path","trace_format","trace_bytes","trace_ms","trace_error"} (docs/engine.md).
 * request_json: {"steps":3,"trace_path":"/abs/rank0.r0.trace.json"} (trace_path ""
 * writes none). Every rank of a data-parallel or pipelined engine must call it with
 * the same steps. A profile larger than 8 MiB drops its smallest kernels
 * ("kernels_dropped"). */
cs_status cs_profile(cs_engine *e, const char *request_json, char **out, char **err) CS_NOEXCEPT;

/* A checksum of all parameters (sum of float64 values and a bitwise hash), for
 * cross-rank equality checks: {"sum":..., "hash":"hex"}. */
cs_status cs_param_checksum(cs_engine *e, char **out, char **err) CS_NOEXCEPT;

/* A new NCCL unique id as 256 hex characters, not JSON (rank 0 calls it and the
 * runner's rendezvous hands it to every rank). CS_ERR_UNSUPPORTED without NCCL. */
cs_status cs_nccl_unique_id(char **out, char **err) CS_NOEXCEPT;

/* The all-reduce microbenchmark on the engine's communicator (bench_comm.cpp).
 * config_json: {"device":"cpu|cuda","device_index":0,"threads":0,"dist":{as the engine
 * config},"sizes":[bytes,...],"iters":20,"warmup":5}. Every rank of the world calls it
 * with the same sizes. Answers {"backend","version","world_size","rank","device",
 * "results":[{"bytes","count","ms":[one per timed iteration]}]}. */
cs_status cs_bench_allreduce(const char *config_json, char **out, char **err) CS_NOEXCEPT;

/* This rank's communication progress, callable from any thread while another
 * runs cs_steps (it reads counters; it never waits for a collective):
 * {"collectives_issued","collectives_completed","last_op","step","bucket",
 *  "pending_ms","deadline_ms","failed","failure"} (docs/engine.md). Counts are
 * of the process's communicators since the last cs_create. */
cs_status cs_comm_progress(char **out, char **err) CS_NOEXCEPT;

/* Sets the per-collective deadline of this process's communicators (initially
 * the config's dist.timeout_ms), from any thread: request_json {"timeout_ms": n},
 * 1 ≤ n ≤ 86400000. A collective outstanding longer fails with CS_ERR_COMM and
 * aborts its communicator (Gloo's own socket timeout stays the config's; the
 * host wait follows this one). Answers {"timeout_ms": n}. */
cs_status cs_set_comm_timeout(const char *request_json, char **out, char **err) CS_NOEXCEPT;

/* Tears the engine down and frees it; safe on NULL. The orderly teardown
 * (waiting for the device's queued work, closing the communicators) reports
 * its first failure as the status and *err; the engine is freed and the handle
 * invalid whatever the status. */
cs_status cs_destroy(cs_engine *e, char **err) CS_NOEXCEPT;

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* CASESTUDY_ENGINE_H */
