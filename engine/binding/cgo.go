package binding

// This is the only Go file that knows C. It opens the engine library with
// dlopen, resolves the cs_ functions with dlsym and calls them through
// function pointers, so the Go build links nothing but libdl and needs no torch
// or CUDA headers (casestudy_engine.h is plain C). The engine allocates every
// string it hands out (answers and error messages, of any length); this file
// copies each into Go memory and gives it back with cs_free.

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include "../native/include/casestudy_engine.h"

typedef int (*cs_abi_version_fn)(void);
typedef void (*cs_free_fn)(char *);
typedef cs_status (*cs_text_fn)(char **, char **);
typedef cs_status (*cs_config_text_fn)(const char *, char **, char **);
typedef cs_status (*cs_create_fn)(const char *, cs_engine **, char **);
typedef cs_status (*cs_engine_text_fn)(cs_engine *, char **, char **);
typedef cs_status (*cs_destroy_fn)(cs_engine *, char **);
typedef cs_status (*cs_engine_request_fn)(cs_engine *, const char *, char **, char **);

static int call_abi_version(void *f) { return ((cs_abi_version_fn)f)(); }
static void call_free(void *f, char *s) { ((cs_free_fn)f)(s); }
static cs_status call_text(void *f, char **out, char **err) { return ((cs_text_fn)f)(out, err); }
static cs_status call_config_text(void *f, const char *cfg, char **out, char **err) {
  return ((cs_config_text_fn)f)(cfg, out, err);
}
static cs_status call_create(void *f, const char *cfg, cs_engine **e, char **err) {
  return ((cs_create_fn)f)(cfg, e, err);
}
static cs_status call_engine_text(void *f, cs_engine *e, char **out, char **err) {
  return ((cs_engine_text_fn)f)(e, out, err);
}
static cs_status call_destroy(void *f, cs_engine *e, char **err) {
  return ((cs_destroy_fn)f)(e, err);
}
static cs_status call_engine_request(void *f, cs_engine *e, const char *req, char **out,
                                     char **err) {
  return ((cs_engine_request_fn)f)(e, req, out, err);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/casestudy/casestudy/engine"
)

// abiSymbols are the functions every library of ABIVersion exports.
var abiSymbols = []string{
	"cs_abi_version", "cs_free", "cs_build_info", "cs_models", "cs_describe", "cs_create",
	"cs_info", "cs_step", "cs_steps", "cs_profile", "cs_param_checksum", "cs_nccl_unique_id",
	"cs_bench_allreduce", "cs_comm_progress", "cs_set_comm_timeout", "cs_destroy",
}

// symbols holds the resolved functions of one opened library.
type symbols struct {
	handle unsafe.Pointer
	fn     map[string]unsafe.Pointer
}

// dlOpen opens path with RTLD_NOW|RTLD_LOCAL (every undefined symbol is
// resolved now, so a libtorch mismatch fails here, not in the middle of a
// step) and RTLD_NODELETE: libtorch and the CUDA runtime leave threads and
// atexit handlers behind that crash if their code is unmapped.
func dlOpen(path string) (*symbols, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	// dlerror is per thread: keep the call and its error on one thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	h := C.dlopen(cpath, C.RTLD_NOW|C.RTLD_LOCAL|C.RTLD_NODELETE)
	if h == nil {
		return nil, dlError("dlopen")
	}
	s := &symbols{handle: h, fn: map[string]unsafe.Pointer{}}
	var missing []string
	for _, name := range abiSymbols {
		cname := C.CString(name)
		C.dlerror() // clear any earlier error
		p := C.dlsym(h, cname)
		C.free(unsafe.Pointer(cname))
		if p == nil {
			missing = append(missing, name)
			continue
		}
		s.fn[name] = p
	}
	if len(missing) > 0 {
		C.dlclose(h)
		return nil, fmt.Errorf("missing symbols %v (a library of another ABI, or not the casestudy engine)", missing)
	}
	return s, nil
}

func dlError(op string) error {
	if msg := C.dlerror(); msg != nil {
		return errors.New(C.GoString(msg))
	}
	return errors.New(op + " failed")
}

func (s *symbols) close() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if C.dlclose(s.handle) != 0 {
		return dlError("dlclose")
	}
	return nil
}

func (s *symbols) abiVersion() int {
	return int(C.call_abi_version(s.fn["cs_abi_version"]))
}

// take copies what an ABI call handed out (out: its answer, errs: its message)
// into Go, releases both with cs_free and turns a failed status into an
// *engine.Error.
func (s *symbols) take(op string, st C.cs_status, out, errs *C.char) (string, error) {
	defer s.free(out)
	defer s.free(errs)
	if status := engine.Status(st); status != engine.StatusOK {
		return "", statusError(op, status, errs)
	}
	if out == nil {
		return "", &engine.Error{Status: engine.StatusRuntime, Op: op, Msg: "returned CS_OK and no answer"}
	}
	return C.GoString(out), nil
}

func (s *symbols) free(p *C.char) {
	if p != nil {
		C.call_free(s.fn["cs_free"], p)
	}
}

// statusError turns a failed status and the engine's message into an *Error.
func statusError(op string, st engine.Status, errs *C.char) error {
	msg := "(the engine gave no message)"
	if errs != nil {
		msg = C.GoString(errs)
	}
	if st < engine.StatusConfig || st > engine.StatusRuntime {
		msg = fmt.Sprintf("unknown status %d: %s", int(st), msg)
		st = engine.StatusRuntime
	}
	return &engine.Error{Status: st, Op: op, Msg: msg}
}

// text calls a function that only answers text (cs_build_info, cs_models,
// cs_nccl_unique_id, cs_comm_progress).
func (s *symbols) text(name string) (string, error) {
	var out, errs *C.char
	st := C.call_text(s.fn[name], &out, &errs)
	return s.take(name, st, out, errs)
}

// configText calls a function that reads config JSON and answers text
// (cs_describe, cs_bench_allreduce, cs_set_comm_timeout).
func (s *symbols) configText(name, config string) (string, error) {
	cfg := C.CString(config)
	defer C.free(unsafe.Pointer(cfg))
	var out, errs *C.char
	st := C.call_config_text(s.fn[name], cfg, &out, &errs)
	return s.take(name, st, out, errs)
}

// create returns the opaque engine handle.
func (s *symbols) create(config string) (unsafe.Pointer, error) {
	cfg := C.CString(config)
	defer C.free(unsafe.Pointer(cfg))
	var e *C.cs_engine
	var errs *C.char
	st := C.call_create(s.fn["cs_create"], cfg, &e, &errs)
	defer s.free(errs)
	if status := engine.Status(st); status != engine.StatusOK {
		return nil, statusError("cs_create", status, errs)
	}
	if e == nil {
		return nil, &engine.Error{Status: engine.StatusRuntime, Op: "cs_create", Msg: "returned CS_OK and no engine"}
	}
	return unsafe.Pointer(e), nil
}

// engineText calls cs_info, cs_step or cs_param_checksum on an engine.
func (s *symbols) engineText(name string, e unsafe.Pointer) (string, error) {
	var out, errs *C.char
	st := C.call_engine_text(s.fn[name], (*C.cs_engine)(e), &out, &errs)
	return s.take(name, st, out, errs)
}

// engineRequest calls cs_steps or cs_profile: an engine and request JSON in, text out.
func (s *symbols) engineRequest(name string, e unsafe.Pointer, request string) (string, error) {
	req := C.CString(request)
	defer C.free(unsafe.Pointer(req))
	var out, errs *C.char
	st := C.call_engine_request(s.fn[name], (*C.cs_engine)(e), req, &out, &errs)
	return s.take(name, st, out, errs)
}

// destroy frees the engine; an error is the failure of its orderly teardown
// (the engine is freed either way).
func (s *symbols) destroy(e unsafe.Pointer) error {
	var errs *C.char
	st := C.call_destroy(s.fn["cs_destroy"], (*C.cs_engine)(e), &errs)
	defer s.free(errs)
	if status := engine.Status(st); status != engine.StatusOK {
		return statusError("cs_destroy", status, errs)
	}
	return nil
}
