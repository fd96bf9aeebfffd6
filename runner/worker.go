package runner

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

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

// RunWorker runs one rank: join the rendezvous, take the configuration, create
// the engine (exchanging the NCCL id first when needed), run the warm-up and
// measured steps while a heartbeat goroutine beats, report metrics, checksum
// and done. An engine error is reported to the runner with its status before
// RunWorker returns it. A SIGTERM, SIGINT or SIGHUP is reported to the runner
// too, then the rank ends by that signal (endBySignal).
func RunWorker(ctx context.Context, o WorkerOptions) error {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	// The signals end the rank (endBySignal), not the context: a rank ends
	// by the signal it got, so the runner can tell who was signalled.
	ctx = context.WithoutCancel(ctx)
	var client atomic.Pointer[rendezvous.Client]
	stopSignals := endBySignal(o.Log, client.Load)
	defer stopSignals()

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
	client.Store(c)
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

	cfg := w.Config
	fault, faulty := splitFault(&cfg, rank)
	var step atomic.Int64
	step.Store(-1)
	stopBeats := heartbeat(c, time.Duration(max(w.HeartbeatMS, 10))*time.Millisecond, &step, finished)

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
	if faulty {
		e = &faultyEngine{Engine: e, fault: fault, log: o.Log, stopBeats: stopBeats}
	}
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

// heartbeat beats every interval from its own goroutine (so a long step still
// beats) until finished closes; the function it returns stops the beats.
func heartbeat(c *rendezvous.Client, every time.Duration, step *atomic.Int64, finished <-chan struct{}) (stop func()) {
	var beating atomic.Bool
	beating.Store(true)
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
	return func() { beating.Store(false) }
}

// endBySignal makes SIGTERM, SIGINT and SIGHUP end the rank by that signal,
// after telling the runner (when joined) and waiting for its reply: the report
// reaches the runner before any peer can notice the end, so the rank that was
// signalled is the one blamed. The runner's own stop is a SIGTERM too; by
// then the trial's cause is recorded and the report changes nothing.
func endBySignal(log io.Writer, client func() *rendezvous.Client) (stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			sig := s.(syscall.Signal)
			name := unix.SignalName(sig)
			fmt.Fprintf(log, "worker: received %s; ending by it\n", name)
			if c := client(); c != nil {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				if err := c.Signal(ctx, name); err != nil {
					fmt.Fprintf(log, "worker: could not tell the runner: %v\n", err)
				}
				cancel()
			}
			dieBy(sig)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
	}
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
