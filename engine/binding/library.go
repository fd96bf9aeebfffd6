package binding

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/casestudy/casestudy/engine"
)

// ABIVersion is the CS_ABI_VERSION this binding speaks.
const ABIVersion = 4

// Library is an opened engine library. Its methods are safe for concurrent
// use. Each Load opens its own reference (dlopen counts them); Close drops it
// once the engines created from it are closed, and a second Close is a no-op.
type Library struct {
	path string
	syms *symbols

	mu      sync.Mutex
	refs    int  // 1 for the Library itself + 1 per open Engine
	closing bool // Close was called
}

// Load opens the library at path and checks its ABI version. A missing file,
// a library that does not load, lacks a cs_ function or reports another ABI
// version is a *LoadError; nothing here aborts the process.
func Load(path string) (*Library, error) {
	if path == "" {
		return nil, &engine.LoadError{Err: fmt.Errorf("%w (empty path)", engine.ErrNoLibrary), Hint: engine.BuildHint}
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	if !fileExists(path) {
		return nil, &engine.LoadError{Path: path, Err: engine.ErrNoLibrary, Hint: engine.BuildHint}
	}
	syms, err := dlOpen(path)
	if err != nil {
		return nil, &engine.LoadError{Path: path, Err: err, Hint: engine.BuildHint}
	}
	if v := syms.abiVersion(); v != ABIVersion {
		_ = syms.close()
		return nil, &engine.LoadError{
			Path: path,
			Err:  fmt.Errorf("%w: the library has ABI version %d, this casestudy binary needs %d", engine.ErrABIMismatch, v, ABIVersion),
			Hint: "rebuild the engine from the same commit as casestudy with `make engine`",
		}
	}
	return &Library{path: path, syms: syms, refs: 1}, nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// Path is the absolute path the library was loaded from.
func (l *Library) Path() string { return l.path }

// acquire takes a reference for an engine or a call; it fails once Close ran.
func (l *Library) acquire() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing || l.refs == 0 {
		return errors.New("engine library " + l.path + " is closed")
	}
	l.refs++
	return nil
}

func (l *Library) release() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refs--
	if l.refs == 0 {
		return l.syms.close()
	}
	return nil
}

// Close releases the library; it is unloaded once every engine created from it
// is closed. Calling Close again does nothing.
func (l *Library) Close() error {
	l.mu.Lock()
	if l.closing {
		l.mu.Unlock()
		return nil
	}
	l.closing = true
	l.mu.Unlock()
	return l.release()
}

// Probe finds the library (Discover(explicit)), loads it, reads its build
// facts and closes it again. Every error is a *LoadError (exit status 3).
func Probe(explicit string) (path string, bi engine.BuildInfo, err error) {
	if path, err = engine.Discover(explicit); err != nil {
		return "", bi, err
	}
	lib, err := Load(path)
	if err != nil {
		return path, bi, err
	}
	defer lib.Close()
	if bi, err = lib.BuildInfo(); err != nil {
		return path, bi, &engine.LoadError{Path: path, Err: err, Hint: engine.BuildHint}
	}
	return path, bi, nil
}

// BuildInfo reports the versions the library was built with.
func (l *Library) BuildInfo() (engine.BuildInfo, error) {
	var bi engine.BuildInfo
	err := l.callJSON(func() (string, error) { return l.syms.text("cs_build_info") }, "cs_build_info", &bi)
	return bi, err
}

// Describe computes a model's static facts (parameters, FLOPs per sample,
// shapes) without building it. Only the model fields of cfg are read.
func (l *Library) Describe(cfg engine.Config) (engine.Description, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return engine.Description{}, err
	}
	return l.describeRaw(string(raw))
}

// describeRaw passes config JSON as is (tests use it for malformed JSON).
func (l *Library) describeRaw(config string) (engine.Description, error) {
	var d engine.Description
	err := l.callJSON(func() (string, error) { return l.syms.configText("cs_describe", config) }, "cs_describe", &d)
	return d, err
}

// Models lists the families and presets the library has (cs_models).
func (l *Library) Models() ([]engine.FamilyPresets, error) {
	var v struct {
		Families []engine.FamilyPresets `json:"families"`
	}
	err := l.callJSON(func() (string, error) { return l.syms.text("cs_models") }, "cs_models", &v)
	return v.Families, err
}

// BenchAllReduce runs the all-reduce microbenchmark on the engine's
// communicator (cs_bench_allreduce; every rank calls it with the same sizes)
// and returns its JSON answer as is. config is the JSON the header documents.
func (l *Library) BenchAllReduce(config []byte) (json.RawMessage, error) {
	if err := l.acquire(); err != nil {
		return nil, err
	}
	defer l.release()
	out, err := l.syms.configText("cs_bench_allreduce", string(config))
	if err != nil {
		return nil, err
	}
	if !json.Valid([]byte(out)) {
		return nil, &engine.Error{Status: engine.StatusRuntime, Op: "cs_bench_allreduce", Msg: fmt.Sprintf("engine returned invalid JSON: %.200q", out)}
	}
	return json.RawMessage(out), nil
}

// NCCLUniqueID returns a new NCCL unique id as hex (rank 0 makes it, the
// rendezvous hands it to the other ranks). ErrUnsupported without NCCL.
func (l *Library) NCCLUniqueID() (string, error) {
	if err := l.acquire(); err != nil {
		return "", err
	}
	defer l.release()
	return l.syms.text("cs_nccl_unique_id")
}

// CommProgress reads this process's communication progress
// (cs_comm_progress). It does not go through an engine's thread: it is meant
// to be called while another goroutine runs Engine.Steps (the worker's
// heartbeats), and the engine only reads counters to answer.
func (l *Library) CommProgress() (engine.CommProgress, error) {
	var p engine.CommProgress
	err := l.callJSON(func() (string, error) { return l.syms.text("cs_comm_progress") }, "cs_comm_progress", &p)
	return p, err
}

// SetCommTimeout sets the per-collective deadline of this process's
// communicators (cs_set_comm_timeout), from any goroutine; it answers the
// deadline now in force.
func (l *Library) SetCommTimeout(ms int) (int, error) {
	req, err := json.Marshal(map[string]int{"timeout_ms": ms})
	if err != nil {
		return 0, err
	}
	var v struct {
		TimeoutMS int `json:"timeout_ms"`
	}
	err = l.callJSON(func() (string, error) { return l.syms.configText("cs_set_comm_timeout", string(req)) }, "cs_set_comm_timeout", &v)
	return v.TimeoutMS, err
}

// callJSON runs call with a reference held and decodes its JSON into v.
func (l *Library) callJSON(call func() (string, error), op string, v any) error {
	if err := l.acquire(); err != nil {
		return err
	}
	defer l.release()
	out, err := call()
	if err != nil {
		return err
	}
	return decode(op, out, v)
}

// decode reads the engine's JSON answer; unknown fields are allowed so that a
// newer engine may add some.
func decode(op, out string, v any) error {
	if err := json.Unmarshal([]byte(out), v); err != nil {
		var nf *engine.NonFiniteError
		if errors.As(err, &nf) { // NaN or infinity: the launch fails with this reason
			return &engine.Error{Status: engine.StatusRuntime, Op: op, Msg: nf.Error()}
		}
		return &engine.Error{Status: engine.StatusRuntime, Op: op, Msg: fmt.Sprintf("engine returned invalid JSON (%v): %.200q", err, out)}
	}
	return nil
}
