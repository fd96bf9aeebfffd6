/* cs_smoke: loads libcasestudy_engine.so with dlopen (as the Go binding does),
 * trains a model for a few steps and prints each step's metrics JSON.
 *   cc -O2 -o cs_smoke tools/cs_smoke.c -ldl
 *   ./cs_smoke build/engine/libcasestudy_engine.so '{"family":"gpt","preset":"tiny",...}' 50
 * Exit status: 0 ok, 1 an engine call failed (status and message printed). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "../include/casestudy_engine.h"

#define BUF (1 << 20)

typedef int (*abi_fn)(void);
typedef cs_status (*info_fn)(char *, size_t, char *, size_t);
typedef cs_status (*create_fn)(const char *, cs_engine **, char *, size_t);
typedef cs_status (*engine_fn)(cs_engine *, char *, size_t, char *, size_t);
typedef cs_status (*destroy_fn)(cs_engine *, char *, size_t);

static void *sym(void *lib, const char *name) {
  void *p = dlsym(lib, name);
  if (!p) {
    fprintf(stderr, "cs_smoke: %s\n", dlerror());
    exit(1);
  }
  return p;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: cs_smoke LIB CONFIG_JSON [STEPS]\n");
    return 2;
  }
  int steps = argc > 3 ? atoi(argv[3]) : 5;
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "cs_smoke: %s\n", dlerror());
    return 1;
  }
  static char out[BUF], err[4096];
  if (((abi_fn)sym(lib, "cs_abi_version"))() != CS_ABI_VERSION) {
    fprintf(stderr, "cs_smoke: ABI mismatch\n");
    return 1;
  }
  cs_status st = ((info_fn)sym(lib, "cs_build_info"))(out, BUF, err, sizeof err);
  printf("build %s\n", st == CS_OK ? out : err);
  cs_engine *e = NULL;
  st = ((create_fn)sym(lib, "cs_create"))(argv[2], &e, err, sizeof err);
  if (st != CS_OK) {
    printf("create: status %d: %s\n", st, err);
    return 1;
  }
  if (((engine_fn)sym(lib, "cs_info"))(e, out, BUF, err, sizeof err) == CS_OK) printf("info %s\n", out);
  engine_fn step = (engine_fn)sym(lib, "cs_step");
  for (int i = 0; i < steps; i++) {
    st = step(e, out, BUF, err, sizeof err);
    if (st != CS_OK) {
      printf("step %d: status %d: %s\n", i, st, err);
      return 1;
    }
    printf("%s\n", out);
  }
  if (((engine_fn)sym(lib, "cs_param_checksum"))(e, out, BUF, err, sizeof err) == CS_OK)
    printf("checksum %s\n", out);
  st = ((destroy_fn)sym(lib, "cs_destroy"))(e, err, sizeof err);
  return st == CS_OK ? 0 : 1;
}
