package runner

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/casestudy/casestudy/engine"
)

// Test-only faults (knob fault.kind) are injected in one place around the
// engine: the worker-side ones below by faultyEngine before the engine's
// step, the engine-side ones (error, oom, slow) by the engine itself, where
// its own error paths run.
const (
	faultCrash = "crash" // SIGKILL itself
	faultAbort = "abort" // SIGABRT itself, as abort(3) does
	faultTerm  = "term"  // SIGTERM itself, as a signal from outside would come
	faultExit  = "exit"  // exit(1) without a word
	faultHang  = "hang"  // stop heartbeats and block
	faultLeak  = "leak"  // allocate and touch host memory, up to leakCap, then block
)

// leakCap bounds the leak fault, so that outside a memory-limited cgroup (its
// test sets one) it cannot take the machine's memory.
const leakCap = 4 << 30

// splitFault takes the worker-side fault out of cfg (the engine gets only the
// faults it injects itself) and returns it when it is rank's.
func splitFault(cfg *engine.Config, rank int) (engine.FaultConfig, bool) {
	f := cfg.Fault
	switch f.Kind {
	case faultCrash, faultAbort, faultTerm, faultExit, faultHang, faultLeak:
		cfg.Fault = engine.FaultConfig{}
		return f, f.Rank == rank
	}
	return engine.FaultConfig{}, false
}

// faultyEngine injects a worker-side fault before step fault.AtStep
// (counting warm-up steps from 0).
type faultyEngine struct {
	Engine
	fault     engine.FaultConfig
	step      int
	log       io.Writer
	stopBeats func() // hang: the heartbeats stop
}

// Steps injects the fault when it is due within the call (the worker starts a
// call at the fault's step, so it is the call's first).
func (e *faultyEngine) Steps(n int) ([]engine.StepMetrics, error) {
	if e.step <= e.fault.AtStep && e.fault.AtStep < e.step+n {
		fmt.Fprintf(e.log, "worker: injecting fault %q at step %d\n", e.fault.Kind, e.step)
		switch e.fault.Kind {
		case faultCrash:
			dieBy(syscall.SIGKILL)
		case faultAbort:
			dieBy(syscall.SIGABRT)
		case faultTerm:
			_ = syscall.Kill(os.Getpid(), syscall.SIGTERM) // handled like one from outside
		case faultExit:
			os.Exit(1)
		case faultHang:
			e.stopBeats()
		case faultLeak:
			leak()
		}
		select {} // the signal is on its way, or (hang) the runner's deadline comes
	}
	e.step += n
	return e.Engine.Steps(n)
}

// leak holds ever more touched memory until the kernel's OOM killer ends the
// process (or leakCap is reached).
func leak() {
	var held [][]byte
	for total := 0; total < leakCap; total += 64 << 20 {
		b := make([]byte, 64<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		held = append(held, b)
	}
	runtime.KeepAlive(held)
}

// dieBy ends the process by sig with the kernel's default action, as a C
// program's abort(3) or a kill from outside does. Go's runtime handles
// SIGABRT itself (a goroutine dump, then exit status 2, or SIGQUITs to its
// other threads with GOTRACEBACK=crash), so the default action is put back
// with rt_sigaction first; no core file is written.
func dieBy(sig syscall.Signal) {
	signal.Reset(sig)
	_ = unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{})
	var dfl [4]uint64 // struct kernel_sigaction, all zero: SIG_DFL, no flags, empty mask
	_, _, _ = unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&dfl)), 0, 8, 0, 0)
	_ = unix.Kill(os.Getpid(), sig)
}
