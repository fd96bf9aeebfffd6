package runner

// The runner's failure handling is tested with the test binary itself as the
// worker program (the classic helper-process pattern): CASESTUDY_TEST_ROLE=
// worker makes TestMain run RunWorker with fakeBackend, a stand-in engine that
// sleeps for its step time and injects the engine-side faults. It is for these
// tests only; the real engine is exercised by the engine package and by
// cmd/casestudy's end-to-end run.

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/casestudy/casestudy/engine"
)

const roleEnv = "CASESTUDY_TEST_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "worker":
		os.Exit(fakeWorkerMain())
	case "runner":
		os.Exit(fakeRunnerMain())
	}
	os.Exit(m.Run())
}

func fakeWorkerMain() int {
	for _, v := range []string{"NCCL_ALGO", "NCCL_NVLS_ENABLE", "CUDA_DEVICE_MAX_CONNECTIONS", "NCCL_DEBUG", "NCCL_DEBUG_SUBSYS"} {
		val, ok := os.LookupEnv(v)
		if !ok {
			val = "<unset>"
		}
		fmt.Fprintf(os.Stderr, "env %s=%s\n", v, val)
	}
	// Stands in for NCCL's tuning output (rank 0, NCCL_DEBUG=INFO with TUNING):
	// a stubborn NCCL that runs Ring/Simple whatever NCCL_ALGO says.
	if os.Getenv("NCCL_DEBUG") == "INFO" && strings.Contains(os.Getenv("NCCL_DEBUG_SUBSYS"), "TUNING") && os.Getenv("CASESTUDY_RANK") == "0" {
		fmt.Fprintln(os.Stderr, "host:1:1 [0] NCCL INFO AllReduce: 1048576 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..1}")
	}
	// Stands in for NCCL's init lines (NCCL_DEBUG=INFO with INIT): each rank
	// connects to the next over FAKE_NCCL_VIA.
	if via := os.Getenv("FAKE_NCCL_VIA"); via != "" && os.Getenv("NCCL_DEBUG") == "INFO" && strings.Contains(os.Getenv("NCCL_DEBUG_SUBSYS"), "INIT") {
		fmt.Fprintf(os.Stderr, "host:1:2 [%s] NCCL INFO Channel 00/0 : %s[%s] -> 0[0] via %s\n", os.Getenv("CASESTUDY_RANK"), os.Getenv("CASESTUDY_RANK"), os.Getenv("CASESTUDY_RANK"), via)
	}
	err := RunWorker(context.Background(), WorkerOptions{Log: os.Stderr,
		Open: func(lib string) (Backend, error) {
			if lib == goneLibrary { // stands in for a library replaced mid-run by one of another ABI
				return nil, &engine.LoadError{Path: lib, Err: engine.ErrABIMismatch}
			}
			return fakeBackend{}, nil
		}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	return 0
}

type fakeBackend struct{}

func (fakeBackend) NCCLUniqueID() (string, error) { return "fake-nccl-id", nil }

func (fakeBackend) Create(cfg engine.Config) (Engine, error) {
	if cfg.Precision == "fp16" { // stands in for a knob the engine refuses
		return nil, &engine.Error{Status: engine.StatusUnsupported, Op: "cs_create", Msg: "fp16 is not supported on cpu"}
	}
	fakeComm.mu.Lock()
	fakeComm.p = engine.CommProgress{Step: -1, Bucket: -1, DeadlineMS: cfg.Dist.TimeoutMS}
	fakeComm.mu.Unlock()
	return &fakeEngine{cfg: cfg}, nil
}

// fakeComm stands in for the engine's communication progress
// (cs_comm_progress): each step of a data-parallel fake issues and completes
// fakeBuckets collectives, and the stall fault holds the faulty rank before
// its first bucket while its peers wait in theirs.
var fakeComm struct {
	mu sync.Mutex
	p  engine.CommProgress
}

const fakeBuckets = 2

// fakeCommWaitEnv, when set, is how long (ms) a fake rank waits in a
// collective whose peer never comes before it fails; otherwise the deadline
// in force (dist.timeout_ms, or what SetCommTimeout set).
const fakeCommWaitEnv = "CASESTUDY_FAKE_COMM_WAIT_MS"

func (fakeBackend) CommProgress() (engine.CommProgress, error) {
	fakeComm.mu.Lock()
	defer fakeComm.mu.Unlock()
	return fakeComm.p, nil
}

func (fakeBackend) SetCommTimeout(ms int) (int, error) {
	fakeComm.mu.Lock()
	defer fakeComm.mu.Unlock()
	fakeComm.p.DeadlineMS = ms
	return ms, nil
}

// collectives runs a data-parallel fake step's collectives; stalled: one
// rank (not this one, or this one when mine) stalls before bucket 0.
func (e *fakeEngine) collectives(step int, stalled, mine bool) error {
	if e.cfg.Dist.WorldSize < 2 {
		return nil
	}
	fakeComm.mu.Lock()
	fakeComm.p.Step, fakeComm.p.Bucket = int64(step), -1
	deadline := fakeComm.p.DeadlineMS
	fakeComm.mu.Unlock()
	if v, err := strconv.Atoi(os.Getenv(fakeCommWaitEnv)); err == nil {
		deadline = v
	}
	if stalled && mine { // held before its first bucket; the runner ends it
		time.Sleep(time.Duration(e.cfg.Fault.SlowMS) * time.Millisecond)
		return &engine.Error{Status: engine.StatusComm, Op: "cs_step", Msg: "gloo: connection closed by peer (after the stall)"}
	}
	for b := 0; b < fakeBuckets; b++ {
		fakeComm.mu.Lock()
		fakeComm.p.Issued++
		fakeComm.p.Bucket = b
		fakeComm.p.LastOp = "all_reduce"
		fakeComm.mu.Unlock()
		if stalled { // the peer never issues its bucket 0
			time.Sleep(time.Duration(deadline) * time.Millisecond)
			fakeComm.mu.Lock()
			fakeComm.p.Failed, fakeComm.p.Failure = true, "host deadline"
			fakeComm.mu.Unlock()
			return &engine.Error{Status: engine.StatusComm, Op: "cs_step",
				Msg: fmt.Sprintf("gloo: collective not finished after %d ms (host deadline)", deadline)}
		}
		fakeComm.mu.Lock()
		fakeComm.p.Completed++
		fakeComm.mu.Unlock()
	}
	return nil
}

type fakeEngine struct {
	cfg  engine.Config
	step int
}

func (e *fakeEngine) Info() (engine.Info, error) {
	return engine.Info{Device: "cpu", Rank: e.cfg.Dist.Rank, WorldSize: e.cfg.Dist.WorldSize}, nil
}

func (e *fakeEngine) Steps(n int) ([]engine.StepMetrics, error) {
	var ms []engine.StepMetrics
	for range n {
		m, err := e.step1()
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	return ms, nil
}

func (e *fakeEngine) step1() (engine.StepMetrics, error) {
	f := e.cfg.Fault
	faulty := f.Kind != "" && f.Rank == e.cfg.Dist.Rank && f.AtStep <= e.step
	ms := 5.0
	if faulty {
		switch f.Kind {
		case "error":
			return engine.StepMetrics{}, &engine.Error{Status: engine.StatusRuntime, Op: "cs_step", Msg: "injected engine error"}
		case "oom":
			return engine.StepMetrics{}, &engine.Error{Status: engine.StatusOOM, Op: "cs_step", Msg: "CUDA out of memory (injected)"}
		case "slow":
			ms += float64(f.SlowMS)
		}
	}
	stalled := f.Kind == "stall" && f.AtStep == e.step
	if err := e.collectives(e.step, stalled, f.Rank == e.cfg.Dist.Rank); err != nil {
		return engine.StepMetrics{}, err
	}
	time.Sleep(time.Duration(ms * float64(time.Millisecond)))
	mb := max(e.cfg.MicroBatch, 1)
	m := engine.StepMetrics{Step: e.step, StepMS: ms, Samples: mb, Tokens: mb * 16, Loss: 10 / float64(e.step+1)}
	e.step++
	return m, nil
}

func (e *fakeEngine) Checksum() (engine.Checksum, error) {
	return engine.Checksum{Sum: 1, Hash: "ab"}, nil
}
func (e *fakeEngine) Close() error { return nil }

// Profile stands in for cs_profile: it runs the steps, reports a GEMM and a
// copy operator per step and writes a minimal trace; under bf16 it fails as a
// library without cs_profile does.
func (e *fakeEngine) Profile(req engine.ProfileRequest) (engine.Profile, error) {
	if e.cfg.Precision == "bf16" { // stands in for a library without cs_profile
		return engine.Profile{}, &engine.Error{Status: engine.StatusUnsupported, Op: "cs_profile", Msg: "no cs_profile"}
	}
	p := engine.Profile{Steps: req.Steps, Device: "cpu"}
	for i := 0; i < req.Steps; i++ {
		m, err := e.step1()
		if err != nil {
			return p, err
		}
		p.StepMS = append(p.StepMS, m.StepMS)
		p.WallMS = append(p.WallMS, m.StepMS)
	}
	p.BusyMS = 4 * float64(req.Steps)
	p.Kernels = []engine.KernelTotal{{Name: "aten::addmm", Calls: 2 * req.Steps, MS: 3 * float64(req.Steps)},
		{Name: "aten::copy_", Calls: req.Steps, MS: float64(req.Steps)}}
	if req.TracePath != "" {
		b := []byte(`{"traceEvents":[]}`)
		if err := os.WriteFile(req.TracePath, b, 0o644); err != nil {
			p.TraceError = err.Error()
		} else {
			p.TracePath, p.TraceBytes, p.TraceFormat = req.TracePath, int64(len(b)), "engine"
		}
	}
	return p, nil
}
