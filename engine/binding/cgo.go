package binding

// This is the only Go file that knows C. It opens the engine library with
// dlopen, resolves the cs_ functions with dlsym and calls them through
// function pointers, so the Go build links nothing but libdl and needs no torch
// or CUDA headers (casestudy_engine.h is plain C).

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include "../native/include/casestudy_engine.h"

typedef int (*cs_abi_version_fn)(void);
typedef cs_status (*cs_write_fn)(char *, size_t, char *, size_t);
typedef cs_status (*cs_describe_fn)(const char *, char *, size_t, char *, size_t);
typedef cs_status (*cs_create_fn)(const char *, cs_engine **, char *, size_t);
typedef cs_status (*cs_engine_write_fn)(cs_engine *, char *, size_t, char *, size_t);
typedef cs_status (*cs_engine_request_fn)(cs_engine *, const char *, char *, size_t, char *, size_t);
typedef cs_status (*cs_destroy_fn)(cs_engine *, char *, size_t);

static int call_abi_version(void *f) { return ((cs_abi_version_fn)f)(); }
static cs_status call_write(void *f, char *out, size_t n, char *err, size_t en) {
  return ((cs_write_fn)f)(out, n, err, en);
}
static cs_status call_describe(void *f, const char *cfg, char *out, size_t n, char *err,
                               size_t en) {
  return ((cs_describe_fn)f)(cfg, out, n, err, en);
}
static cs_status call_create(void *f, const char *cfg, cs_engine **e, char *err, size_t en) {
  return ((cs_create_fn)f)(cfg, e, err, en);
}
static cs_status call_engine_write(void *f, cs_engine *e, char *out, size_t n, char *err,
                                   size_t en) {
  return ((cs_engine_write_fn)f)(e, out, n, err, en);
}
static cs_status call_engine_request(void *f, cs_engine *e, const char *req, char *out, size_t n,
                                     char *err, size_t en) {
  return ((cs_engine_request_fn)f)(e, req, out, n, err, en);
}
static cs_status call_destroy(void *f, cs_engine *e, char *err, size_t en) {
  return ((cs_destroy_fn)f)(e, err, en);
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

// Output buffers start at 64 KiB and double on CS_ERR_BUFFER up to 64 MiB;
// error messages are cut at 16 KiB by the engine.
const (
	initialOutLen = 64 << 10
	maxOutLen     = 64 << 20
	errLen        = 16 << 10
)

// abiSymbols are the functions every library of ABIVersion exports.
var abiSymbols = []string{
	"cs_abi_version", "cs_build_info", "cs_describe", "cs_create", "cs_info",
	"cs_step", "cs_param_checksum", "cs_nccl_unique_id", "cs_destroy",
}

// optionalSymbols were added after ABI 1 shipped; a library may lack them.
var optionalSymbols = []string{"cs_models", "cs_bench_allreduce", "cs_profile"}

// stepOutLen is cs_step's output buffer. cs_step answers CS_ERR_BUFFER after
// it ran the step, so a retry would run another one: its buffer starts far
// above any step's metrics (a few KiB) and is never grown.
const stepOutLen = 1 << 20

// profileOutLen is cs_profile's output buffer, never grown either (a retry
// would profile more steps): the engine drops its smallest kernels to fit.
const profileOutLen = 8 << 20

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
	for _, name := range optionalSymbols {
		cname := C.CString(name)
		if p := C.dlsym(h, cname); p != nil {
			s.fn[name] = p
		}
		C.free(unsafe.Pointer(cname))
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

// withBuffers runs one ABI call with an output and an error buffer, growing the
// output buffer while the engine answers CS_ERR_BUFFER.
func withBuffers(op string, call func(out *C.char, outLen C.size_t, errb *C.char) C.cs_status) (string, error) {
	return withBuffersFrom(op, initialOutLen, maxOutLen, call)
}

// withBuffersFrom starts with n bytes and grows up to max (max == n: no retry).
func withBuffersFrom(op string, n, max int, call func(out *C.char, outLen C.size_t, errb *C.char) C.cs_status) (string, error) {
	errb := make([]byte, errLen)
	for ; ; n *= 2 {
		out := make([]byte, n)
		st := engine.Status(call((*C.char)(unsafe.Pointer(&out[0])), C.size_t(n), (*C.char)(unsafe.Pointer(&errb[0]))))
		switch {
		case st == engine.StatusOK:
			return cString(out), nil
		case st == engine.StatusBuffer && n < max:
			continue
		}
		return "", statusError(op, st, errb)
	}
}

// statusError turns a failed status and the error buffer into an *Error.
func statusError(op string, st engine.Status, errb []byte) error {
	msg := cString(errb)
	if msg == "" {
		msg = "(the engine gave no message)"
	}
	if st < engine.StatusConfig || st > engine.StatusBuffer {
		msg = fmt.Sprintf("unknown status %d: %s", int(st), msg)
		st = engine.StatusRuntime
	}
	return &engine.Error{Status: st, Op: op, Msg: msg}
}

// cString is the text before the first NUL of b.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// has reports whether the library exports an optional function.
func (s *symbols) has(name string) bool { return s.fn[name] != nil }

// write calls a function that only writes JSON (cs_build_info, cs_models,
// cs_nccl_unique_id).
func (s *symbols) write(name string) (string, error) {
	f := s.fn[name]
	return withBuffers(name, func(out *C.char, n C.size_t, errb *C.char) C.cs_status {
		return C.call_write(f, out, n, errb, errLen)
	})
}

// describe calls a function that reads config JSON and writes JSON
// (cs_describe, cs_bench_allreduce).
func (s *symbols) describe(name, config string) (string, error) {
	cfg := C.CString(config)
	defer C.free(unsafe.Pointer(cfg))
	f := s.fn[name]
	return withBuffers(name, func(out *C.char, n C.size_t, errb *C.char) C.cs_status {
		return C.call_describe(f, cfg, out, n, errb, errLen)
	})
}

// create returns the opaque engine handle.
func (s *symbols) create(config string) (unsafe.Pointer, error) {
	cfg := C.CString(config)
	defer C.free(unsafe.Pointer(cfg))
	errb := make([]byte, errLen)
	var e *C.cs_engine
	st := engine.Status(C.call_create(s.fn["cs_create"], cfg, &e, (*C.char)(unsafe.Pointer(&errb[0])), errLen))
	if st != engine.StatusOK {
		return nil, statusError("cs_create", st, errb)
	}
	if e == nil {
		return nil, &engine.Error{Status: engine.StatusRuntime, Op: "cs_create", Msg: "returned CS_OK and no engine"}
	}
	return unsafe.Pointer(e), nil
}

// engineWrite calls cs_info, cs_step or cs_param_checksum on an engine.
func (s *symbols) engineWrite(name string, e unsafe.Pointer) (string, error) {
	f := s.fn[name]
	call := func(out *C.char, n C.size_t, errb *C.char) C.cs_status {
		return C.call_engine_write(f, (*C.cs_engine)(e), out, n, errb, errLen)
	}
	if name == "cs_step" {
		out, err := withBuffersFrom(name, stepOutLen, stepOutLen, call)
		var ee *engine.Error
		if errors.As(err, &ee) && ee.Status == engine.StatusBuffer {
			ee.Status = engine.StatusRuntime
			ee.Msg = "the step ran but its metrics did not fit in 1 MiB and are lost: " + ee.Msg
		}
		return out, err
	}
	return withBuffers(name, call)
}

// engineRequest calls cs_profile: an engine, request JSON in, JSON out, with
// one buffer of n bytes and no retry (the call runs steps).
func (s *symbols) engineRequest(name string, e unsafe.Pointer, request string, n int) (string, error) {
	req := C.CString(request)
	defer C.free(unsafe.Pointer(req))
	f := s.fn[name]
	return withBuffersFrom(name, n, n, func(out *C.char, n C.size_t, errb *C.char) C.cs_status {
		return C.call_engine_request(f, (*C.cs_engine)(e), req, out, n, errb, errLen)
	})
}

func (s *symbols) destroy(e unsafe.Pointer) error {
	errb := make([]byte, errLen)
	st := engine.Status(C.call_destroy(s.fn["cs_destroy"], (*C.cs_engine)(e), (*C.char)(unsafe.Pointer(&errb[0])), errLen))
	if st != engine.StatusOK {
		return statusError("cs_destroy", st, errb)
	}
	return nil
}
