package runner

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/profile"
	"github.com/casestudy/casestudy/runner/rendezvous"
)

// Engine is what a worker needs of a created engine (*engine.Engine).
type Engine interface {
	Info() (engine.Info, error)
	Step() (engine.StepMetrics, error)
	Checksum() (engine.Checksum, error)
	Profile(req engine.ProfileRequest) (engine.Profile, error)
	Close() error
}

// Backend creates engines; the real one is the loaded engine library.
type Backend interface {
	NCCLUniqueID() (string, error)
	Create(cfg engine.Config) (Engine, error)
}

// WorkerOptions configure one rank.
type WorkerOptions struct {
	Getenv func(string) string               // nil: os.Getenv
	Open   func(lib string) (Backend, error) // loads the engine library
	Log    io.Writer                         // the rank's log (stderr)
	OnLost func()                            // the runner went away; nil: exit(70)
}

// Faults a worker injects itself (the engine does error, oom, slow).
const (
	faultCrash = "crash" // SIGKILL itself
	faultAbort = "abort" // SIGABRT itself
	faultExit  = "exit"  // exit(1) without a word
	faultHang  = "hang"  // stop heartbeats and sleep
)

// RunWorker runs one rank: join the rendezvous, take the configuration, create
// the engine (exchanging the NCCL id first when needed), run the warm-up and
// measured steps while a heartbeat goroutine beats, report metrics, checksum
// and done. An engine error is reported to the runner with its status before
// RunWorker returns it.
func RunWorker(ctx context.Context, o WorkerOptions) error {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	addr, token := getenv(rendezvous.EnvAddr), getenv(rendezvous.EnvToken)
	rankText := getenv(rendezvous.EnvRank)
	if rankText == "" { // started by srun (launch.Slurm): one environment for every rank
		rankText = getenv("SLURM_PROCID")
	}
	rank, err := strconv.Atoi(rankText)
	if addr == "" || err != nil {
		return fmt.Errorf("casestudy worker is started by casestudy run ($%s and $%s are not set)",
			rendezvous.EnvAddr, rendezvous.EnvRank)
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	c, w, err := rendezvous.Dial(dctx, addr, token, rank)
	cancel()
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Fprintf(o.Log, "worker: rank %d joined %s (%d ranks, %d warm-up + %d steps)\n", rank, addr, w.Ranks, w.WarmupSteps, w.Steps)

	lost := o.OnLost
	if lost == nil {
		lost = func() {
			fmt.Fprintln(o.Log, "worker: lost the runner; exiting")
			os.Exit(70)
		}
	}
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-c.Lost():
			lost()
		case <-finished:
		}
	}()

	// Faults the worker injects itself; the engine gets the others.
	cfg := w.Config
	fault := cfg.Fault
	mine := fault.Kind != "" && fault.Rank == rank
	switch fault.Kind {
	case faultCrash, faultAbort, faultExit, faultHang:
		cfg.Fault = engine.FaultConfig{}
	default:
		mine = false
	}
	var step atomic.Int64
	step.Store(-1)
	var beating atomic.Bool
	beating.Store(true)
	every := time.Duration(max(w.HeartbeatMS, 10)) * time.Millisecond
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-finished:
				return
			case <-t.C:
				if beating.Load() {
					_ = c.Heartbeat(int(step.Load()))
				}
			}
		}
	}()
	inject := func(at int) {
		if !mine || fault.AtStep != at {
			return
		}
		fmt.Fprintf(o.Log, "worker: injecting fault %q at step %d\n", fault.Kind, at)
		switch fault.Kind {
		case faultCrash:
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		case faultAbort: // die by SIGABRT like abort(3), not by Go's exit status 2
			debug.SetTraceback("crash")
			_ = syscall.Kill(os.Getpid(), syscall.SIGABRT)
		case faultExit:
			os.Exit(1)
		case faultHang:
			beating.Store(false)
			<-ctx.Done()
		}
		time.Sleep(time.Hour) // a signal is on its way
	}

	report := func(err error) error {
		status := workerStatus(err)
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if rerr := c.Error(rctx, status, err.Error()); rerr != nil {
			fmt.Fprintf(o.Log, "worker: could not report the error: %v\n", rerr)
		}
		return err
	}

	be, err := o.Open(w.EngineLib)
	if err != nil {
		return report(err)
	}
	if cfg.Dist.WorldSize > 1 && cfg.Dist.Backend == "nccl" {
		if rank == 0 {
			id, err := be.NCCLUniqueID()
			if err != nil {
				return report(err)
			}
			if err := c.Set(ctx, "nccl_id", id); err != nil {
				return err
			}
			cfg.Dist.NCCLID = id
		} else if cfg.Dist.NCCLID, err = c.Get(ctx, "nccl_id"); err != nil {
			return err
		}
	}
	e, err := be.Create(cfg)
	if err != nil {
		return report(err)
	}
	defer e.Close()
	info, err := e.Info()
	if err != nil {
		return report(err)
	}
	if err := c.Info(info); err != nil {
		return err
	}
	if err := c.Barrier(ctx, "start"); err != nil {
		return err
	}
	total := w.WarmupSteps + w.Steps
	var measured []engine.StepMetrics
	for i := 0; i < total; i++ {
		if err := ctx.Err(); err != nil { // SIGTERM from the runner
			return err
		}
		inject(i)
		m, err := e.Step()
		if err != nil {
			return report(err)
		}
		step.Store(int64(i))
		if i >= w.WarmupSteps {
			measured = append(measured, m)
		}
		if err := c.Step(m, i < w.WarmupSteps); err != nil {
			return err
		}
	}
	sum, err := e.Checksum()
	if err != nil {
		return report(err)
	}
	if err := c.Checksum(sum); err != nil {
		return err
	}
	if p := w.Profile; p != nil && p.Steps > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := c.Profile(profileLaunch(e, p, measured, o.Log)); err != nil {
			return err
		}
	}
	if err := e.Close(); err != nil {
		return report(err)
	}
	if err := c.Done(ctx); err != nil {
		return err
	}
	return nil
}

// profileLaunch profiles p.Steps more steps after the measured ones (and
// after the checksum, so the record's checksum is the same with or without a
// profile). A profile that fails is reported in the summary's Error: the
// launch's measurement stands.
func profileLaunch(e Engine, p *rendezvous.ProfilePlan, measured []engine.StepMetrics, log io.Writer) *profile.Summary {
	fmt.Fprintf(log, "worker: profiling %d more steps (trace %s)\n", p.Steps, p.TracePath)
	raw, err := e.Profile(engine.ProfileRequest{Steps: p.Steps, TracePath: p.TracePath})
	if err != nil {
		fmt.Fprintf(log, "worker: profiling failed: %v\n", err)
		return profile.Failed(err)
	}
	s := profile.Summarize(raw, measured)
	if s.TraceError != "" {
		fmt.Fprintf(log, "worker: the trace was not written: %s\n", s.TraceError)
	}
	fmt.Fprintf(log, "worker: profiled %d steps in %.0f ms: busy %.2f ms of %.2f ms per step, %d kernels\n",
		s.Steps, s.ExtraWallMS, s.BusyMS, s.StepMS, s.DistinctKernels)
	return s
}
