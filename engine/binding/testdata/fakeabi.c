/* fakeabi.c: a stand-in library for the Go binding's own tests only (ABI check,
 * missing symbols, engine-owned answers of any length, status mapping,
 * teardown errors, thread affinity). It trains nothing; the engine's tests use
 * the real libcasestudy_engine.so. Kept in step with casestudy_engine.h.
 *
 * Built by engine/binding/library_test.go with:
 *   cc -shared -fPIC -I../native/include [-DFAKE_ABI=N] [-DOMIT_STEP] fakeabi.c
 * What it does is chosen by the config's preset: "bad" (a config error),
 * "nomsg" (a failure without a message), "big-step" (step metrics of several
 * MiB), "teardown-fails" (cs_destroy reports an error).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "casestudy_engine.h"

#ifndef FAKE_ABI
#define FAKE_ABI CS_ABI_VERSION
#endif

/* Long answers are padded to this many bytes: more than any fixed buffer the
 * binding ever had (64 KiB growing, 1 MiB for cs_step). */
#define BIG_ANSWER (3 * 1024 * 1024)

struct cs_engine {
  pthread_t thread; /* the thread cs_create ran on */
  int steps;
  int big_step, teardown_fails;
};

static char *dup(const char *s) {
  char *p = malloc(strlen(s) + 1);
  if (p != NULL) strcpy(p, s);
  return p;
}

/* {"<key>":<value>,"pad":"xxx..."} with n padding bytes. */
static char *padded(const char *head, size_t n) {
  char *p = malloc(strlen(head) + n + 3);
  if (p == NULL) return NULL;
  strcpy(p, head);
  memset(p + strlen(head), 'x', n);
  strcpy(p + strlen(head) + n, "\"}");
  return p;
}

static cs_status fail(cs_status st, const char *msg, char **err) {
  if (err != NULL) *err = msg == NULL ? NULL : dup(msg);
  return st;
}

static cs_status answer(char *text, char **out, char **err) {
  if (err != NULL) *err = NULL;
  *out = text;
  return text == NULL ? fail(CS_ERR_OOM, NULL, err) : CS_OK;
}

int cs_abi_version(void) { return FAKE_ABI; }

void cs_free(char *s) { free(s); }

cs_status cs_build_info(char **out, char **err) {
  return answer(padded("{\"abi\":2,\"torch\":\"fake\",\"pad\":\"", BIG_ANSWER), out, err);
}

cs_status cs_models(char **out, char **err) {
  return answer(dup("{\"families\":[{\"family\":\"gpt\",\"presets\":[\"fake\"]}]}"), out, err);
}

cs_status cs_describe(const char *config_json, char **out, char **err) {
  *out = NULL;
  if (strstr(config_json, "\"preset\":\"bad\"") != NULL)
    return fail(CS_ERR_CONFIG, "preset: unknown preset \"bad\" for family gpt", err);
  if (strstr(config_json, "\"preset\":\"nomsg\"") != NULL) return fail(CS_ERR_RUNTIME, NULL, err);
  return answer(dup("{\"family\":\"gpt\",\"preset\":\"fake\",\"params\":42,\"flops_per_sample\":252,"
                    "\"tokens_per_sample\":1,\"shapes\":{\"layers\":1}}"),
                out, err);
}

cs_status cs_create(const char *config_json, cs_engine **out, char **err) {
  *out = NULL;
  if (strstr(config_json, "\"device\":\"cuda\"") != NULL)
    return fail(CS_ERR_UNSUPPORTED, "device: the fake has no GPU", err);
  cs_engine *e = calloc(1, sizeof *e);
  if (e == NULL) return fail(CS_ERR_OOM, "calloc failed", err);
  e->thread = pthread_self();
  e->big_step = strstr(config_json, "\"preset\":\"big-step\"") != NULL;
  e->teardown_fails = strstr(config_json, "\"preset\":\"teardown-fails\"") != NULL;
  *out = e;
  if (err != NULL) *err = NULL;
  return CS_OK;
}

static int same_thread(cs_engine *e) { return pthread_equal(e->thread, pthread_self()); }

cs_status cs_info(cs_engine *e, char **out, char **err) {
  *out = NULL;
  if (!same_thread(e)) return fail(CS_ERR_RUNTIME, "called on another thread than cs_create", err);
  return answer(dup("{\"family\":\"gpt\",\"device\":\"cpu\",\"world_size\":1}"), out, err);
}

#ifndef OMIT_STEP
cs_status cs_step(cs_engine *e, char **out, char **err) {
  *out = NULL;
  if (!same_thread(e)) return fail(CS_ERR_RUNTIME, "called on another thread than cs_create", err);
  e->steps++;
  char head[128];
  snprintf(head, sizeof head, "{\"step\":%d,\"loss\":%g,\"pad\":\"", e->steps, 10.0 / e->steps);
  return answer(padded(head, e->big_step ? BIG_ANSWER : 0), out, err);
}
#endif

/* {"steps":n}: n steps' metrics as an array. */
cs_status cs_steps(cs_engine *e, const char *request_json, char **out, char **err) {
  *out = NULL;
  if (!same_thread(e)) return fail(CS_ERR_RUNTIME, "called on another thread than cs_create", err);
  int n = 0;
  if (sscanf(request_json, "{\"steps\":%d}", &n) != 1 || n < 1 || n > 1000)
    return fail(CS_ERR_CONFIG, "steps request: expected {\"steps\": n}", err);
  char *text = malloc((size_t)n * 64 + 3);
  if (text == NULL) return fail(CS_ERR_OOM, "out of memory", err);
  size_t len = 0;
  text[len++] = '[';
  for (int i = 0; i < n; i++) {
    e->steps++;
    len += (size_t)sprintf(text + len, "%s{\"step\":%d,\"loss\":%g}", i ? "," : "", e->steps,
                           10.0 / e->steps);
  }
  text[len++] = ']';
  text[len] = 0;
  return answer(text, out, err);
}

cs_status cs_profile(cs_engine *e, const char *request_json, char **out, char **err) {
  (void)e;
  (void)request_json;
  *out = NULL;
  return fail(CS_ERR_UNSUPPORTED, "the fake has no profiler", err);
}

cs_status cs_param_checksum(cs_engine *e, char **out, char **err) {
  (void)e;
  *out = NULL;
  return fail((cs_status)42, "a status the ABI does not define", err);
}

cs_status cs_nccl_unique_id(char **out, char **err) {
  *out = NULL;
  return fail(CS_ERR_UNSUPPORTED, "built without NCCL", err);
}

cs_status cs_bench_allreduce(const char *config_json, char **out, char **err) {
  (void)config_json;
  *out = NULL;
  return fail(CS_ERR_UNSUPPORTED, "the fake has no communicator", err);
}

/* Progress counters of a rank that issued 3 collectives and finished 2. */
cs_status cs_comm_progress(char **out, char **err) {
  return answer(dup("{\"collectives_issued\":3,\"collectives_completed\":2,\"last_op\":\"all_reduce\","
                    "\"step\":1,\"bucket\":0,\"pending_ms\":12.5,\"deadline_ms\":60000,"
                    "\"failed\":false,\"failure\":\"\"}"),
                out, err);
}

cs_status cs_set_comm_timeout(const char *request_json, char **out, char **err) {
  int ms = 0;
  *out = NULL;
  if (sscanf(request_json, "{\"timeout_ms\":%d}", &ms) != 1 || ms < 1)
    return fail(CS_ERR_CONFIG, "comm timeout request: expected {\"timeout_ms\": n} with n >= 1", err);
  char text[64];
  snprintf(text, sizeof text, "{\"timeout_ms\":%d}", ms);
  return answer(dup(text), out, err);
}

cs_status cs_destroy(cs_engine *e, char **err) {
  int fails = e != NULL && e->teardown_fails;
  free(e);
  if (fails) return fail(CS_ERR_COMM, "teardown: the communicator did not close", err);
  if (err != NULL) *err = NULL;
  return CS_OK;
}
