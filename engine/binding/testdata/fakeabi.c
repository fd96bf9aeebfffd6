/* fakeabi.c: a stand-in library for the Go binding's own tests only (ABI check,
 * missing symbols, buffer growth, status mapping, thread affinity). It trains
 * nothing; the engine's tests use the real libcasestudy_engine.so.
 *
 * Built by engine/library_test.go with:
 *   cc -shared -fPIC -I../native/include [-DFAKE_ABI=N] [-DOMIT_STEP] fakeabi.c
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "casestudy_engine.h"

#ifndef FAKE_ABI
#define FAKE_ABI CS_ABI_VERSION
#endif

/* cs_build_info pads its answer to this many bytes: more than the binding's
 * first 64 KiB buffer, so it has to grow twice. */
#define BIG_ANSWER (200 * 1024)

struct cs_engine {
  pthread_t thread; /* the thread cs_create ran on */
  int steps;
};

static cs_status fail(cs_status st, const char *msg, char *err, size_t err_len) {
  snprintf(err, err_len, "%s", msg);
  return st;
}

int cs_abi_version(void) { return FAKE_ABI; }

cs_status cs_build_info(char *out, size_t out_len, char *err, size_t err_len) {
  const char *head = "{\"abi\":1,\"torch\":\"fake\",\"pad\":\"";
  size_t need = strlen(head) + BIG_ANSWER + 3;
  if (out_len < need) return fail(CS_ERR_BUFFER, "buffer too small", err, err_len);
  strcpy(out, head);
  memset(out + strlen(head), 'x', BIG_ANSWER);
  strcpy(out + strlen(head) + BIG_ANSWER, "\"}");
  return CS_OK;
}

cs_status cs_describe(const char *config_json, char *out, size_t out_len, char *err,
                      size_t err_len) {
  if (strstr(config_json, "\"preset\":\"bad\"") != NULL)
    return fail(CS_ERR_CONFIG, "preset: unknown preset \"bad\" for family gpt", err, err_len);
  snprintf(out, out_len,
           "{\"family\":\"gpt\",\"preset\":\"fake\",\"params\":42,\"flops_per_sample\":252,"
           "\"tokens_per_sample\":1,\"shapes\":{\"layers\":1}}");
  return CS_OK;
}

cs_status cs_create(const char *config_json, cs_engine **out, char *err, size_t err_len) {
  if (strstr(config_json, "\"device\":\"cuda\"") != NULL)
    return fail(CS_ERR_UNSUPPORTED, "device: the fake has no GPU", err, err_len);
  cs_engine *e = calloc(1, sizeof *e);
  if (e == NULL) return fail(CS_ERR_OOM, "calloc failed", err, err_len);
  e->thread = pthread_self();
  *out = e;
  return CS_OK;
}

static cs_status same_thread(cs_engine *e, char *err, size_t err_len) {
  if (!pthread_equal(e->thread, pthread_self()))
    return fail(CS_ERR_RUNTIME, "called on another thread than cs_create", err, err_len);
  return CS_OK;
}

cs_status cs_info(cs_engine *e, char *out, size_t out_len, char *err, size_t err_len) {
  cs_status st = same_thread(e, err, err_len);
  if (st != CS_OK) return st;
  snprintf(out, out_len, "{\"family\":\"gpt\",\"device\":\"cpu\",\"world_size\":1}");
  return CS_OK;
}

#ifndef OMIT_STEP
cs_status cs_step(cs_engine *e, char *out, size_t out_len, char *err, size_t err_len) {
  cs_status st = same_thread(e, err, err_len);
  if (st != CS_OK) return st;
  e->steps++;
  snprintf(out, out_len, "{\"step\":%d,\"loss\":%g}", e->steps, 10.0 / e->steps);
  return CS_OK;
}
#endif

cs_status cs_param_checksum(cs_engine *e, char *out, size_t out_len, char *err, size_t err_len) {
  (void)e, (void)out, (void)out_len;
  return fail((cs_status)42, "a status the ABI does not define", err, err_len);
}

cs_status cs_nccl_unique_id(char *out, size_t out_len, char *err, size_t err_len) {
  (void)out, (void)out_len;
  return fail(CS_ERR_UNSUPPORTED, "built without NCCL", err, err_len);
}

cs_status cs_destroy(cs_engine *e, char *err, size_t err_len) {
  (void)err, (void)err_len;
  free(e);
  return CS_OK;
}
