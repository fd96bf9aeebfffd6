/* cs_smoke: loads libcasestudy_engine.so with dlopen (as the Go binding does),
 * trains a model for a few steps and prints each step's metrics JSON.
 *   cc -O2 -o cs_smoke tools/cs_smoke.c -ldl
 *   ./cs_smoke build/engine/libcasestudy_engine.so '{"family":"gpt","preset":"tiny",...}' 50
 * Exit status: 0 ok, 1 an engine call failed (status and message printed). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "../include/casestudy_engine.h"

typedef int (*abi_fn)(void);
typedef void (*free_fn)(char *);
typedef cs_status (*text_fn)(char **, char **);
typedef cs_status (*create_fn)(const char *, cs_engine **, char **);
typedef cs_status (*engine_fn)(cs_engine *, char **, char **);
typedef cs_status (*destroy_fn)(cs_engine *, char **);

static void *lib;

static void *sym(const char *name) {
  void *p = dlsym(lib, name);
  if (!p) {
    fprintf(stderr, "cs_smoke: %s\n", dlerror());
    exit(1);
  }
  return p;
}

/* Prints what an ABI call answered ("ok" for none) or its error, and releases
 * both strings (the engine's; NULL is fine). */
static int report(const char *what, cs_status st, char *out, char *err) {
  if (st == CS_OK)
    printf("%s%s\n", what, out ? out : "ok");
  else
    printf("%sstatus %d: %s\n", what, st, err ? err : "(no message)");
  ((free_fn)sym("cs_free"))(out);
  ((free_fn)sym("cs_free"))(err);
  return st == CS_OK ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: cs_smoke LIB CONFIG_JSON [STEPS]\n");
    return 2;
  }
  int steps = argc > 3 ? atoi(argv[3]) : 5;
  lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "cs_smoke: %s\n", dlerror());
    return 1;
  }
  if (((abi_fn)sym("cs_abi_version"))() != CS_ABI_VERSION) {
    fprintf(stderr, "cs_smoke: ABI mismatch\n");
    return 1;
  }
  char *out = NULL, *err = NULL;
  cs_status st = ((text_fn)sym("cs_build_info"))(&out, &err);
  report("build ", st, out, err);
  cs_engine *e = NULL;
  st = ((create_fn)sym("cs_create"))(argv[2], &e, &err);
  if (report("create ", st, NULL, err) != 0) return 1;
  st = ((engine_fn)sym("cs_info"))(e, &out, &err);
  report("info ", st, out, err);
  engine_fn step = (engine_fn)sym("cs_step");
  for (int i = 0; i < steps; i++) {
    st = step(e, &out, &err);
    if (report("", st, out, err) != 0) return 1;
  }
  st = ((engine_fn)sym("cs_param_checksum"))(e, &out, &err);
  report("checksum ", st, out, err);
  st = ((destroy_fn)sym("cs_destroy"))(e, &err);
  return report("destroy ", st, NULL, err);
}
