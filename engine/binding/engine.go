package binding

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/casestudy/casestudy/engine"
)

// Engine is one created training engine (cs_create). Every call on it runs on
// one OS thread owned by the engine, so the thread-local state of CUDA, NCCL
// and libtorch (current device and stream, autocast, grad mode) set up by
// cs_create is the state cs_step sees. Calls are serialised; an Engine is safe
// for concurrent use but runs one call at a time.
type Engine struct {
	lib    *Library
	handle unsafe.Pointer // *cs_engine, touched only on the engine thread
	calls  chan func()

	mu     sync.Mutex
	closed bool
}

var errEngineClosed = errors.New("engine: the engine is closed")

// Create builds an engine (model, optimizer, data, communicator) from cfg. It
// may take long (weights on the device, communicator setup). A config the
// engine rejects is ErrConfig, a knob it cannot honour here ErrUnsupported.
func (l *Library) Create(cfg engine.Config) (*Engine, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	return l.createRaw(string(raw))
}

// createRaw passes config JSON as is (tests use it for malformed JSON).
func (l *Library) createRaw(config string) (*Engine, error) {
	if err := l.acquire(); err != nil {
		return nil, err
	}
	e := &Engine{lib: l, calls: make(chan func())}
	started := make(chan error)
	go e.run(config, started)
	if err := <-started; err != nil {
		_ = l.release()
		return nil, err
	}
	return e, nil
}

// run is the engine thread: it creates the engine, then runs the calls sent to
// it until Close. The goroutine stays locked to its OS thread and never
// unlocks, so the thread exits with it and no other goroutine inherits the
// engine's thread-local state.
func (e *Engine) run(config string, started chan<- error) {
	runtime.LockOSThread()
	h, err := e.lib.syms.create(config)
	if err != nil {
		started <- err
		return
	}
	e.handle = h
	started <- nil
	for f := range e.calls {
		f()
	}
}

// do runs f on the engine thread and waits for it.
func (e *Engine) do(f func()) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errEngineClosed
	}
	done := make(chan struct{})
	e.calls <- func() { f(); close(done) }
	<-done
	return nil
}

// call runs an engine function that answers JSON and decodes it into v.
func (e *Engine) call(name string, v any) error {
	var out string
	var err error
	if derr := e.do(func() { out, err = e.lib.syms.engineText(name, e.handle) }); derr != nil {
		return derr
	}
	if err != nil {
		return err
	}
	return decode(name, out, v)
}

// Info reports the engine's static facts: the model description plus device,
// precision, ranks and memory after setup.
func (e *Engine) Info() (engine.Info, error) {
	var in engine.Info
	err := e.call("cs_info", &in)
	return in, err
}

// Step runs one training step (grad_accum micro-batches and the optimizer)
// and returns its metrics.
func (e *Engine) Step() (engine.StepMetrics, error) {
	var m engine.StepMetrics
	err := e.call("cs_step", &m)
	return m, err
}

// Steps runs n training steps back to back with one wait for the device, after
// the last (cs_steps), and returns their metrics in order.
func (e *Engine) Steps(n int) ([]engine.StepMetrics, error) {
	var ms []engine.StepMetrics
	if err := e.request("cs_steps", map[string]int{"steps": n}, &ms); err != nil {
		return nil, err
	}
	if len(ms) != n {
		return nil, &engine.Error{Status: engine.StatusRuntime, Op: "cs_steps",
			Msg: fmt.Sprintf("answered %d steps' metrics for %d steps", len(ms), n)}
	}
	return ms, nil
}

// Profile runs req.Steps more steps under libtorch's profiler and returns
// what they spent their time on (engine.Profile); the trace goes to
// req.TracePath. Every rank of a data-parallel or pipelined engine must call
// it with the same steps.
func (e *Engine) Profile(req engine.ProfileRequest) (engine.Profile, error) {
	var p engine.Profile
	err := e.request("cs_profile", req, &p)
	return p, err
}

// request runs an engine function that takes request JSON (req, marshalled)
// and answers JSON, decoded into v.
func (e *Engine) request(name string, req, v any) error {
	raw, err := json.Marshal(req)
	if err != nil {
		return err
	}
	var out string
	if derr := e.do(func() { out, err = e.lib.syms.engineRequest(name, e.handle, string(raw)) }); derr != nil {
		return derr
	}
	if err != nil {
		return err
	}
	return decode(name, out, v)
}

// Checksum sums and hashes all parameters (ranks of a data parallel trial
// must agree).
func (e *Engine) Checksum() (engine.Checksum, error) {
	var c engine.Checksum
	err := e.call("cs_param_checksum", &c)
	return c, err
}

// Close destroys the engine and frees its memory. An error is the failure of
// its orderly teardown (cs_destroy: the device's queued work, closing the
// communicators); the engine is gone either way. A second Close does nothing.
func (e *Engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	var err error
	done := make(chan struct{})
	e.calls <- func() { err = e.lib.syms.destroy(e.handle); close(done) }
	<-done
	close(e.calls)
	e.handle = nil
	return errors.Join(err, e.lib.release())
}
