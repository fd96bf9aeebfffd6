package runner

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/profile"
	"github.com/casestudy/casestudy/runner/rendezvous"
	"github.com/casestudy/casestudy/timeline"
)

// Engine is what a worker needs of a created engine (*engine.Engine).
type Engine interface {
	Info() (engine.Info, error)
	Steps(n int) ([]engine.StepMetrics, error) // n steps, one wait for the device
	Checksum() (engine.Checksum, error)
	Profile(req engine.ProfileRequest) (engine.Profile, error)
	Close() error
}

// Backend creates engines; the real one is the loaded engine library.
// CommProgress and SetCommTimeout are the process's, callable from any
// goroutine while an engine call runs (cs_comm_progress, cs_set_comm_timeout).
type Backend interface {
	NCCLUniqueID() (string, error)
	Create(cfg engine.Config) (Engine, error)
	CommProgress() (engine.CommProgress, error)
	SetCommTimeout(ms int) (int, error)
}

// WorkerOptions configure one rank.
type WorkerOptions struct {
	Getenv func(string) string               // nil: os.Getenv
	Open   func(lib string) (Backend, error) // loads the engine library
	Log    io.Writer                         // the rank's log (stderr)
	OnLost func()                            // the runner went away; nil: exit(70)
}

// worker is one rank between joining the rendezvous and done.
type worker struct {
	o         WorkerOptions
	c         *rendezvous.Client
	w         *rendezvous.Welcome
	rank      int
	cfg       engine.Config           // the welcome's, less the faults the worker injects (fault.go)
	fault     engine.FaultConfig      // the worker's own fault
	faulty    bool                    // the fault is this rank's
	step      atomic.Int64            // last completed step, for heartbeats
	backend   atomic.Pointer[Backend] // once loaded: its progress goes in the heartbeats
	stopBeats func()                  // the hang fault stops the heartbeats
	finished  chan struct{}
	measured  []engine.StepMetrics // the measured steps, for the profile's comparison
}

// RunWorker runs one rank: join the rendezvous, load the engine library, wait
// until the runner lets the launch touch the GPU, create the engine
// (exchanging the NCCL id first when needed), run the warm-up and measured
// steps while a heartbeat goroutine beats, report metrics, checksum, the
// profile (knob profile) and done. It marks the end of each phase for the
// launch's timeline. An engine error is reported to the runner with its
// status before RunWorker returns it. A SIGTERM, SIGINT or SIGHUP is reported
// to the runner too, then the rank ends by that signal (endBySignal).
func RunWorker(ctx context.Context, o WorkerOptions) error {
	started := time.Now()
	if o.Log == nil {
		o.Log = io.Discard
	}
	// The signals end the rank (endBySignal), not the context: a rank ends
	// by the signal it got, so the runner can tell who was signalled.
	ctx = context.WithoutCancel(ctx)
	var client atomic.Pointer[rendezvous.Client]
	stopSignals := endBySignal(o.Log, client.Load)
	defer stopSignals()

	wk, err := join(ctx, o)
	if err != nil {
		return err
	}
	defer wk.c.Close()
	client.Store(wk.c)
	wk.mark(timeline.MarkStarted, started)
	wk.mark(timeline.MarkJoined, time.Now())
	wk.finished = make(chan struct{})
	defer close(wk.finished)
	wk.exitWhenLost()
	wk.stopBeats = heartbeat(wk.c, time.Duration(max(wk.w.HeartbeatMS, 10))*time.Millisecond, &wk.step, wk.progress, wk.finished)

	be, err := wk.o.Open(wk.w.EngineLib)
	if err != nil { // the library is the machine's, not the trial's: the sweep stops
		return wk.reportAs(ctx, StatusEnvironment, err)
	}
	wk.backend.Store(&be)
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
	if err := wk.run(ctx, e, be); err != nil {
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
	wk.fault, wk.faulty = splitFault(&wk.cfg, rank)
	wk.step.Store(-1)
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

// report tells the runner why the rank stops (with the engine error's
// status) and returns err.
func (wk *worker) report(ctx context.Context, err error) error {
	return wk.reportAs(ctx, workerStatus(err), err)
}

// reportAs tells the runner why the rank stops, with the given status.
func (wk *worker) reportAs(ctx context.Context, status string, err error) error {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if rerr := wk.c.Error(rctx, status, err.Error()); rerr != nil {
		fmt.Fprintf(wk.o.Log, "worker: could not report the error: %v\n", rerr)
	}
	return err
}

// create exchanges the NCCL unique id (rank 0 makes it, the others get it)
// and creates the engine (wrapped in the worker's own fault, when it has one).
func (wk *worker) create(ctx context.Context, be Backend) (Engine, error) {
	cfg := wk.cfg
	if ppg := wk.w.DevicePerLocalRank; ppg > 0 {
		getenv := wk.o.Getenv
		if getenv == nil {
			getenv = os.Getenv
		}
		local, err := strconv.Atoi(getenv("SLURM_LOCALID"))
		if err != nil || local < 0 {
			return nil, wk.report(ctx, fmt.Errorf("rank %d sees every GPU of its node and picks its device from $SLURM_LOCALID, which is %q", wk.rank, getenv("SLURM_LOCALID")))
		}
		cfg.DeviceIndex = local / ppg
		if cvd := getenv("CUDA_VISIBLE_DEVICES"); cvd != "" && cfg.DeviceIndex >= len(strings.Split(cvd, ",")) {
			return nil, wk.report(ctx, fmt.Errorf("rank %d (local rank %d) needs device %d of its node, but the step shows it CUDA_VISIBLE_DEVICES=%s: "+
				"something bound GPUs per task (--gpus-per-task or --gpu-bind in launcher.srun_args, SLURM_GPU_BIND); casestudy needs every GPU of the node visible to each rank",
				wk.rank, local, cfg.DeviceIndex, cvd))
		}
		fmt.Fprintf(wk.o.Log, "worker: rank %d is local rank %d of its node: device %d\n", wk.rank, local, cfg.DeviceIndex)
	}
	if cfg.Dist.Backend == "nccl" { // a world of one too (Machine.DPWorldOfOne)
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
	if wk.faulty {
		e = &faultyEngine{Engine: e, fault: wk.fault, log: wk.o.Log, stopBeats: wk.stopBeats}
	}
	return e, nil
}

// run reports the engine's facts, meets the other ranks at the start barrier
// and runs the warm-up and measured steps, marking where the measured window
// opens and closes.
func (wk *worker) run(ctx context.Context, e Engine, be Backend) error {
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
	ready := time.Now()
	wk.mark(timeline.MarkReady, ready)
	warmup := wk.w.WarmupSteps
	if warmup == 0 {
		wk.mark(timeline.MarkWarm, ready)
	}
	breaks := wk.faultSteps()
	step := 0         // the next step's index (the engine counts every step, warm-up ones included)
	lastWarmMS := 0.0 // the last warm-up step's time: the collective deadline's measure
	// call runs n steps in one engine call and reports them.
	call := func(n int, warm bool) (time.Time, error) {
		ms, err := e.Steps(n)
		if err != nil {
			return time.Time{}, wk.report(ctx, err)
		}
		end := time.Now()
		for _, m := range ms {
			if warm {
				lastWarmMS = m.StepMS
			} else {
				wk.measured = append(wk.measured, m)
			}
			if err := wk.c.Step(m, warm); err != nil {
				return end, err
			}
		}
		if step == 0 && warm {
			wk.mark(timeline.MarkFirstStep, end)
		}
		step += n
		wk.step.Store(int64(step - 1))
		return end, nil
	}
	// the planned warm-up: the first step alone, then the rest
	loadFrom, end := ready, ready
	for _, n := range stepCalls(warmup, warmup, breaks) {
		var err error
		if end, err = call(n, true); err != nil {
			return err
		}
		if step == 1 {
			loadFrom = end // load is counted from the end of the first step
		}
	}
	// the warm-up's floor: more warm-up calls until it lasted long enough
	for k := 0; warmup > 0 && wk.more(ctx, "warmup", k, end.Sub(loadFrom), wk.w.WarmupSeconds); k++ {
		var err error
		if end, err = call(maxStepsPerCall, true); err != nil {
			return err
		}
	}
	if warmup > 0 {
		wk.mark(timeline.MarkWarm, end)
		wk.warmDeadline(be, lastWarmMS)
	}
	// the planned measured steps, then more until the window lasted long enough
	from := end
	for _, n := range measuredCalls(step, step+wk.w.Steps, breaks) {
		var err error
		if end, err = call(n, false); err != nil {
			return err
		}
	}
	for k := 0; wk.more(ctx, "measure", k, end.Sub(from), wk.w.MeasureSeconds); k++ {
		var err error
		if end, err = call(maxStepsPerCall, false); err != nil {
			return err
		}
	}
	wk.mark(timeline.MarkMeasured, time.Now())
	return nil
}

// more reports whether a phase that lasted elapsed needs another call to
// reach its floor (seconds; 0: none). Every rank must run the same steps, so
// with several ranks rank 0 decides and the others read its decision (key
// window/<phase>/<k> in the trial's store).
func (wk *worker) more(ctx context.Context, phase string, k int, elapsed time.Duration, floor float64) bool {
	if floor <= 0 {
		return false
	}
	key := fmt.Sprintf("window/%s/%d", phase, k)
	if wk.w.Ranks <= 1 {
		return elapsed.Seconds() < floor
	}
	if wk.rank == 0 {
		v := "0"
		if elapsed.Seconds() < floor {
			v = "1"
		}
		if err := wk.c.Set(ctx, key, v); err != nil {
			return false // the runner is gone: stop extending, the launch ends anyway
		}
		return v == "1"
	}
	v, err := wk.c.Get(ctx, key)
	return err == nil && v == "1"
}

// faultSteps are the steps at which a fault of this rank is due (the engine's
// or the worker's own): each starts an engine call, so that the steps before
// it are reported first.
func (wk *worker) faultSteps() []int {
	var at []int
	if f := wk.cfg.Fault; f.Kind != "" && f.Rank == wk.rank {
		at = append(at, f.AtStep)
	}
	if wk.faulty {
		at = append(at, wk.fault.AtStep)
	}
	return at
}

// finish reports the parameter checksum, profiles more steps when the
// welcome asks for it, destroys the engine and says done.
func (wk *worker) finish(ctx context.Context, e Engine) error {
	sum, err := e.Checksum()
	if err != nil {
		return wk.report(ctx, err)
	}
	if err := wk.c.Checksum(sum); err != nil {
		return err
	}
	if p := wk.w.Profile; p != nil && p.Steps > 0 {
		if err := wk.c.Profile(profileLaunch(e, p, wk.measured, wk.o.Log)); err != nil {
			return err
		}
		wk.mark(timeline.MarkProfiled, time.Now())
	}
	if err := e.Close(); err != nil {
		return wk.report(ctx, err)
	}
	wk.mark(timeline.MarkFinished, time.Now())
	return wk.c.Done(ctx)
}

// warmDeadline lowers the collective deadline, once the warm-up showed the
// step time, to max(60 s, 5 × the last warm-up step) (never above the one the
// engine started with: commDeadlineMS).
func (wk *worker) warmDeadline(be Backend, stepMS float64) {
	initial := wk.cfg.Dist.TimeoutMS
	if initial <= 0 {
		initial = commDeadlineMS(0) // the engine's default
	}
	ms := warmDeadlineMS(stepMS, initial)
	if ms >= initial || wk.cfg.Dist.WorldSize <= 1 && wk.cfg.Dist.Backend == "" {
		return // no communicator, or nothing to lower
	}
	got, err := be.SetCommTimeout(ms)
	if err != nil {
		fmt.Fprintf(wk.o.Log, "worker: could not set the collective deadline: %v\n", err)
		return
	}
	fmt.Fprintf(wk.o.Log, "worker: collective deadline %d ms (5 x the warm step of %.1f ms, at least 60 s)\n", got, stepMS)
}

// progress is the loaded engine's communication progress; nil before the
// engine library is loaded or when it cannot say.
func (wk *worker) progress() *engine.CommProgress {
	be := wk.backend.Load()
	if be == nil {
		return nil
	}
	p, err := (*be).CommProgress()
	if err != nil {
		return nil
	}
	return &p
}

// heartbeat beats every interval from its own goroutine (so a long step still
// beats) until finished closes; the function it returns stops the beats. Each
// beat carries the communication progress (progress may answer nil).
func heartbeat(c *rendezvous.Client, every time.Duration, step *atomic.Int64, progress func() *engine.CommProgress, finished <-chan struct{}) (stop func()) {
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
					_ = c.Heartbeat(int(step.Load()), progress())
				}
			}
		}
	}()
	return func() { beating.Store(false) }
}

// endBySignal makes SIGTERM, SIGINT, SIGHUP (and the rankEndSignals sent from
// outside: SIGABRT, SIGQUIT, SIGSEGV, ...) end the rank by that signal,
// after telling the runner (when joined) and waiting for its reply: the report
// reaches the runner before any peer can notice the end, so the rank that was
// signalled is the one blamed. The runner's own stop is a SIGTERM too; by
// then the trial's cause is recorded and the report changes nothing.
func endBySignal(log io.Writer, client func() *rendezvous.Client) (stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, rankEndSignals...)
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
