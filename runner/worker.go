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
	"github.com/casestudy/casestudy/runner/rendezvous"
	"github.com/casestudy/casestudy/timeline"
)

// Engine is what a worker needs of a created engine (*engine.Engine).
type Engine interface {
	Info() (engine.Info, error)
	Step() (engine.StepMetrics, error)
	Checksum() (engine.Checksum, error)
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

// worker is one rank between joining the rendezvous and done.
type worker struct {
	o        WorkerOptions
	c        *rendezvous.Client
	w        *rendezvous.Welcome
	rank     int
	cfg      engine.Config      // the welcome's, less the faults the worker injects
	fault    engine.FaultConfig // the worker's own fault, when it is this rank's
	step     atomic.Int64       // last completed step, for heartbeats
	beating  atomic.Bool
	finished chan struct{}
}

// RunWorker runs one rank: join the rendezvous, load the engine library, wait
// until the runner lets the launch touch the GPU, create the engine
// (exchanging the NCCL id first when needed), run the warm-up and measured
// steps while a heartbeat goroutine beats, report metrics, checksum and done.
// It marks the end of each phase for the launch's timeline. An engine error
// is reported to the runner with its status before RunWorker returns it.
func RunWorker(ctx context.Context, o WorkerOptions) error {
	started := time.Now()
	if o.Log == nil {
		o.Log = io.Discard
	}
	wk, err := join(ctx, o)
	if err != nil {
		return err
	}
	defer wk.c.Close()
	wk.mark(timeline.MarkStarted, started)
	wk.mark(timeline.MarkJoined, time.Now())
	wk.finished = make(chan struct{})
	defer close(wk.finished)
	wk.exitWhenLost()
	wk.heartbeat()

	be, err := wk.o.Open(wk.w.EngineLib)
	if err != nil {
		return wk.report(ctx, err)
	}
	wk.mark(timeline.MarkLoaded, time.Now())
	if _, err := wk.c.Get(ctx, rendezvous.KeyGo); err != nil {
		return err
	}
	wk.mark(timeline.MarkReleased, time.Now())
	e, err := wk.create(ctx, be)
	if err != nil {
		return err
	}
	defer e.Close()
	if err := wk.run(ctx, e); err != nil {
		return err
	}
	return wk.finish(ctx, e)
}

// join reads the rendezvous address, token and rank from the environment and
// joins.
func join(ctx context.Context, o WorkerOptions) (*worker, error) {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	addr, token := getenv(rendezvous.EnvAddr), getenv(rendezvous.EnvToken)
	rankText := getenv(rendezvous.EnvRank)
	if rankText == "" { // started by srun (launch.Slurm): one environment for every rank
		rankText = getenv("SLURM_PROCID")
	}
	rank, err := strconv.Atoi(rankText)
	if addr == "" || err != nil {
		return nil, fmt.Errorf("casestudy worker is started by casestudy run ($%s and $%s are not set)",
			rendezvous.EnvAddr, rendezvous.EnvRank)
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	c, w, err := rendezvous.Dial(dctx, addr, token, rank)
	cancel()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Log, "worker: rank %d joined %s (%d ranks, %d warm-up + %d steps)\n", rank, addr, w.Ranks, w.WarmupSteps, w.Steps)
	wk := &worker{o: o, c: c, w: w, rank: rank, cfg: w.Config}
	// Faults the worker injects itself; the engine gets the others.
	switch f := w.Config.Fault; f.Kind {
	case faultCrash, faultAbort, faultExit, faultHang:
		wk.cfg.Fault = engine.FaultConfig{}
		if f.Rank == rank {
			wk.fault = f
		}
	}
	wk.step.Store(-1)
	wk.beating.Store(true)
	return wk, nil
}

// mark sends a timeline mark; a lost connection shows elsewhere.
func (wk *worker) mark(name string, at time.Time) { _ = wk.c.Mark(name, at) }

// exitWhenLost ends the process when the connection to the runner drops (the
// runner died or gave up on the launch).
func (wk *worker) exitWhenLost() {
	lost := wk.o.OnLost
	if lost == nil {
		lost = func() {
			fmt.Fprintln(wk.o.Log, "worker: lost the runner; exiting")
			os.Exit(70)
		}
	}
	go func() {
		select {
		case <-wk.c.Lost():
			lost()
		case <-wk.finished:
		}
	}()
}

// heartbeat tells the runner the last completed step every heartbeat_ms from
// its own goroutine, so that a long step still beats.
func (wk *worker) heartbeat() {
	every := time.Duration(max(wk.w.HeartbeatMS, 10)) * time.Millisecond
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-wk.finished:
				return
			case <-t.C:
				if wk.beating.Load() {
					_ = wk.c.Heartbeat(int(wk.step.Load()))
				}
			}
		}
	}()
}

// report tells the runner why the rank stops (with the engine error's
// status) and returns err.
func (wk *worker) report(ctx context.Context, err error) error {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if rerr := wk.c.Error(rctx, workerStatus(err), err.Error()); rerr != nil {
		fmt.Fprintf(wk.o.Log, "worker: could not report the error: %v\n", rerr)
	}
	return err
}

// create exchanges the NCCL unique id (rank 0 makes it, the others get it)
// and creates the engine.
func (wk *worker) create(ctx context.Context, be Backend) (Engine, error) {
	cfg := wk.cfg
	if cfg.Dist.WorldSize > 1 && cfg.Dist.Backend == "nccl" {
		if wk.rank == 0 {
			id, err := be.NCCLUniqueID()
			if err != nil {
				return nil, wk.report(ctx, err)
			}
			if err := wk.c.Set(ctx, "nccl_id", id); err != nil {
				return nil, err
			}
			cfg.Dist.NCCLID = id
		} else {
			id, err := wk.c.Get(ctx, "nccl_id")
			if err != nil {
				return nil, err
			}
			cfg.Dist.NCCLID = id
		}
		wk.mark(timeline.MarkNCCLID, time.Now())
	}
	e, err := be.Create(cfg)
	if err != nil {
		return nil, wk.report(ctx, err)
	}
	wk.mark(timeline.MarkCreated, time.Now())
	return e, nil
}

// run reports the engine's facts, meets the other ranks at the start barrier
// and runs the warm-up and measured steps, marking where the measured window
// opens and closes.
func (wk *worker) run(ctx context.Context, e Engine) error {
	info, err := e.Info()
	if err != nil {
		return wk.report(ctx, err)
	}
	if err := wk.c.Info(info); err != nil {
		return err
	}
	if err := wk.c.Barrier(ctx, "start"); err != nil {
		return err
	}
	wk.mark(timeline.MarkReady, time.Now())
	warmup, total := wk.w.WarmupSteps, wk.w.WarmupSteps+wk.w.Steps
	if warmup == 0 {
		wk.mark(timeline.MarkWarm, time.Now())
	}
	for i := 0; i < total; i++ {
		if err := ctx.Err(); err != nil { // SIGTERM from the runner
			return err
		}
		wk.inject(ctx, i)
		m, err := e.Step()
		if err != nil {
			return wk.report(ctx, err)
		}
		wk.step.Store(int64(i))
		end := time.Now()
		if err := wk.c.Step(m, i < warmup); err != nil {
			return err
		}
		if i == 0 && warmup > 0 {
			wk.mark(timeline.MarkFirstStep, end)
		}
		if i == warmup-1 {
			wk.mark(timeline.MarkWarm, end)
		}
	}
	wk.mark(timeline.MarkMeasured, time.Now())
	return nil
}

// finish reports the parameter checksum, destroys the engine and says done.
func (wk *worker) finish(ctx context.Context, e Engine) error {
	sum, err := e.Checksum()
	if err != nil {
		return wk.report(ctx, err)
	}
	if err := wk.c.Checksum(sum); err != nil {
		return err
	}
	if err := e.Close(); err != nil {
		return wk.report(ctx, err)
	}
	wk.mark(timeline.MarkFinished, time.Now())
	return wk.c.Done(ctx)
}

// inject fires the worker's own fault at step at.
func (wk *worker) inject(ctx context.Context, at int) {
	f := wk.fault
	if f.Kind == "" || f.AtStep != at {
		return
	}
	fmt.Fprintf(wk.o.Log, "worker: injecting fault %q at step %d\n", f.Kind, at)
	switch f.Kind {
	case faultCrash:
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	case faultAbort: // die by SIGABRT like abort(3), not by Go's exit status 2
		debug.SetTraceback("crash")
		_ = syscall.Kill(os.Getpid(), syscall.SIGABRT)
	case faultExit:
		os.Exit(1)
	case faultHang:
		wk.beating.Store(false)
		<-ctx.Done()
	}
	time.Sleep(time.Hour) // a signal is on its way
}
