// Package runner executes a study's plan: each trial's repeats are launched as
// fresh worker processes (launch.Launcher) that meet the runner at a
// rendezvous; the runner owns deadlines, classifies outcomes, commits one
// record per trial to the run directory (store.Writer) and drives greedy
// sweeps round by round.
package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/casestudy/casestudy/launch"
	"github.com/casestudy/casestudy/measure"
	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/study"
)

// ErrInterrupted is returned when a signal stopped the sweep; the run
// directory can be resumed.
var ErrInterrupted = errors.New("interrupted")

// Options configure a sweep. Zero durations take the defaults below.
type Options struct {
	Study   *study.Study
	Plan    *study.Plan
	Machine *Machine
	Writer  *store.Writer

	Launcher   launch.Launcher // nil: launch.Local
	Executable string          // the worker program (casestudy itself)
	WorkerArgs []string        // nil: ["worker"]
	Env        []string        // the parent environment the trials start from

	RendezvousAddr string                        // where the rendezvous listens; "": 127.0.0.1:0
	AdvertiseHost  string                        // the host ranks dial (multi-node launchers); "": the listen address
	Timeout        time.Duration                 // per launch; 0: the study's workload.timeout
	HeartbeatEvery time.Duration                 // default 1 s
	HeartbeatLimit time.Duration                 // default 60 s of silence
	KillGrace      time.Duration                 // SIGTERM → SIGKILL, default 5 s
	SampleEvery    time.Duration                 // GPU sampling, default 100 ms (≥ 10 Hz inside the measured window)
	Overlap        string                        // one of OverlapModes; "" is OverlapOff
	Retries        int                           // extra launches after an infrastructure failure
	Interleave     bool                          // force interleaved rounds (the default; workload.interleave: false turns them off)
	Design         *stats.Design                 // launch schedule and statistics (nil: DesignFor the study and machine)
	Only           []string                      // run only these trial IDs (--trial)
	Previous       map[string]*store.TrialRecord // records committed before (--resume), by ID; greedy reuses them
	NoisyCV        float64
	OOMKills       func() (uint64, bool) // the kernel's OOM-kill count; nil: /proc/vmstat oom_kill
	// AllocationEnded says why the scheduler's allocation the trials run in
	// is ending ("" while it runs); nil: no scheduler (UseSlurm sets it)
	AllocationEnded func() string

	// RehearsalEstimates: a rehearsal's plan-time memory estimate per rank,
	// by trial ID (CheckRehearsalFit), recorded with each trial.
	RehearsalEstimates map[string]int64
	// RehearsalModels: the same estimates split into their static and
	// per-sample parts (RankEstimateModel), recorded with each trial.
	RehearsalModels map[string]store.RankMemoryModel
	// RehearseDistinct: rehearse only the first trial of each distinct layout
	// and path (--rehearse-distinct); the others are recorded as covered.
	RehearseDistinct bool
	// RehearsalUnfit: with RehearseDistinct, the trials whose ranks do not
	// fit but whose layout a trial that fits rehearses (CheckRehearsalFit's
	// Unfit), recorded skipped with the reason.
	RehearsalUnfit map[string]string
	// RehearsalNoReference: the trials whose one-rank reference does not fit
	// one device (CheckRehearsalFit's NoReference), recorded skipped.
	RehearsalNoReference map[string]string
	// RehearsalNoTwin: the tensor-parallel trials whose fp32 twin does not
	// fit (CheckRehearsalFit's NoTwin), recorded skipped.
	RehearsalNoTwin map[string]string
	// RehearsalTwinMicroBatch: the tensor-parallel trials whose fp32 twin
	// runs at a smaller micro-batch (CheckRehearsalFit's TwinMicroBatch), with
	// a one-rank fp32 reference of its own global batch.
	RehearsalTwinMicroBatch map[string]int
	// RehearseNoFaults: no fault launches (--rehearse-faults=false: another
	// study's rehearsal already checked how the runner classifies them).
	RehearseNoFaults bool

	Progress     Progress
	TrialCommand func(id string) string // the command that re-runs one trial

	// measured, when set, sees every launch's record before the schedule
	// does (tests taint launches with it: CPUs have no throttle counters).
	measured func(*store.RepeatRecord)
}

// Runner runs one sweep.
type Runner struct {
	opts     Options
	metric   stats.Metric                  // the objective: what the schedule and greedy compare
	launches int                           // launches started so far (progress)
	records  map[string]*store.TrialRecord // committed (or reused) in this run
	// saidFixedPort: the fixed rendezvous port's note (no launch prepared
	// ahead) was logged
	saidFixedPort bool
	start         time.Time     // of the sweep: the time budget counts from here
	spent         time.Duration // wall time of the launches so far
	preheated     bool
	prepared      *launchRun  // the next launch, prepared while the current one runs
	upcoming      *nextLaunch // the launch to prepare during the next one (overlap), set by the batch
	lastEnd       time.Time   // when the last launch ended (its timeline's end), or the run began
	commitMS      float64     // record commits since lastEnd

	halt context.CancelCauseFunc // stops the sweep on an environment fault (stopEnvironment)
}

// Result is what a sweep did.
type Result struct {
	Outcomes map[store.Outcome]int
	Trials   int // records committed by this invocation
}

// New checks the options and fills the defaults.
func New(o Options) (*Runner, error) {
	if o.Study == nil || o.Plan == nil || o.Machine == nil || o.Writer == nil {
		return nil, errors.New("runner: study, plan, machine and writer are required")
	}
	if o.Launcher == nil {
		o.Launcher = launch.Local{}
	}
	if o.WorkerArgs == nil {
		o.WorkerArgs = []string{"worker"}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if o.Timeout <= 0 {
		o.Timeout = o.Study.Workload.Timeout
	}
	def(&o.Timeout, 30*time.Minute)
	def(&o.HeartbeatEvery, time.Second)
	def(&o.HeartbeatLimit, 60*time.Second)
	def(&o.KillGrace, 5*time.Second)
	def(&o.SampleEvery, 100*time.Millisecond)
	if o.RendezvousAddr == "" {
		o.RendezvousAddr = "127.0.0.1:0"
	}
	if o.Retries < 0 {
		o.Retries = 0
	}
	if o.Design == nil {
		d := DesignFor(o.Study, o.Machine.Device)
		o.Design = &d
	}
	if o.Interleave && !o.Design.Interleave {
		d := *o.Design
		d.Interleave = true
		o.Design = &d
	}
	if o.Overlap == "" {
		o.Overlap = OverlapOff
	}
	if !slices.Contains(OverlapModes, o.Overlap) {
		return nil, fmt.Errorf("runner: overlap %q: use one of %s", o.Overlap, strings.Join(OverlapModes, ", "))
	}
	if o.Progress == nil {
		o.Progress = nopProgress{}
	}
	if o.TrialCommand == nil {
		o.TrialCommand = func(id string) string { return "casestudy run " + o.Study.Path + " --trial " + id }
	}
	m, _ := measure.MetricFor(store.Objective{Metric: o.Study.Objective.Metric, Goal: o.Study.Objective.Goal})
	return &Runner{opts: o, metric: m, records: map[string]*store.TrialRecord{}}, nil
}

func (r *Runner) logf(format string, args ...any) { r.opts.Progress.Log(fmt.Sprintf(format, args...)) }

// Run executes the plan (or drives the greedy rounds) and commits every record.
// It returns ErrInterrupted after a signal, or the store's error when a record
// could not be committed (disk full): earlier records stay intact.
func (r *Runner) Run(ctx context.Context) (*Result, error) {
	r.lastEnd = time.Now()
	defer r.discardPrepared()
	ctx, r.halt = context.WithCancelCause(ctx)
	defer r.halt(nil)
	res := &Result{Outcomes: map[store.Outcome]int{}}
	r.start = time.Now()
	if err := r.commitDropped(r.opts.Plan.Dropped, res); err != nil {
		return res, err
	}
	if r.opts.Machine.Rehearse {
		return res, r.runRehearsal(ctx, res)
	}
	if r.opts.Plan.Strategy == "greedy" && len(r.opts.Only) == 0 {
		return res, ended(ctx, r.runGreedy(ctx, res))
	}
	_, err := r.runBatch(ctx, r.select_(r.opts.Plan.Trials), res)
	return res, ended(ctx, err)
}

// select_ keeps the trials of --trial, minus those already committed.
func (r *Runner) select_(all []study.Trial) []study.Trial {
	only := map[string]bool{}
	for _, id := range r.opts.Only {
		only[id] = true
	}
	var out []study.Trial
	for _, t := range all {
		if (len(only) == 0 || only[t.ID]) && r.opts.Previous[t.ID] == nil {
			out = append(out, t)
		}
	}
	return out
}

// commitDropped records the combinations the planner dropped as skipped
// (once: a resumed run already has them).
func (r *Runner) commitDropped(dropped []study.Dropped, res *Result) error {
	if len(r.opts.Only) > 0 {
		return nil
	}
	for _, d := range dropped {
		id := DroppedID(d.Knobs)
		if r.opts.Previous[id] != nil || r.records[id] != nil {
			continue
		}
		now := time.Now().UTC()
		rec := &store.TrialRecord{ID: id, Index: -1 - len(r.records), Knobs: d.Knobs, Outcome: store.Skipped, Error: d.Reason,
			FailedRank: -1, Started: now, Finished: now}
		if err := r.commit(rec, res); err != nil {
			return err
		}
	}
	return nil
}

// DroppedID names a dropped combination stably: "skipped-" and a hash of its
// knob values.
func DroppedID(knobs map[string]string) string {
	keys := make([]string, 0, len(knobs))
	for k := range knobs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%s=%s\n", k, knobs[k])
	}
	return "skipped-" + hex.EncodeToString(h.Sum(nil))[:10]
}

func (r *Runner) commit(rec *store.TrialRecord, res *Result) error {
	start := time.Now()
	if r.opts.Machine != nil && r.opts.Machine.Rehearse && rec.Outcome == store.Interrupted {
		// A rehearsal does not resume (run --rehearse refuses --resume): its
		// interrupted trials are rehearsed again by a new rehearsal.
		rec.Error = strings.ReplaceAll(rec.Error, "--resume runs it again", "a new rehearsal runs it again (a rehearsal does not resume)")
	}
	err := r.opts.Writer.Append(rec)
	r.commitMS += float64(time.Since(start)) / float64(time.Millisecond)
	if err != nil {
		return fmt.Errorf("%w; the trials committed before are intact", err)
	}
	r.records[rec.ID] = rec
	res.Outcomes[rec.Outcome]++
	res.Trials++
	r.opts.Progress.TrialDone(rec)
	return nil
}

// String formats the outcome counts for a final line, most usual outcome first.
func (res *Result) String() string {
	var parts []string
	for _, oc := range []store.Outcome{store.OK, store.Failed, store.OOM, store.Timeout, store.Crashed,
		store.Unsupported, store.Skipped, store.Interrupted} {
		if n := res.Outcomes[oc]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, oc))
		}
	}
	if len(parts) == 0 {
		return "no trials"
	}
	return strings.Join(parts, ", ")
}
