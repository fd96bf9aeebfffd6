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
	"sort"
	"strings"
	"time"

	"github.com/casestudy/casestudy/launch"
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
	StoreHost      string                        // "": 127.0.0.1 (Gloo's TCPStore)
	Timeout        time.Duration                 // per launch; 0: the study's workload.timeout
	HeartbeatEvery time.Duration                 // default 1 s
	HeartbeatLimit time.Duration                 // default 60 s of silence
	KillGrace      time.Duration                 // SIGTERM → SIGKILL, default 5 s
	SampleEvery    time.Duration                 // GPU sampling, default 100 ms (≥ 10 Hz inside the measured window)
	Overlap        string                        // OverlapOff (""), OverlapOn or OverlapAA
	Retries        int                           // extra launches after an infrastructure failure
	Interleave     bool                          // repeats round-robin across trials (or workload.interleave)
	Only           []string                      // run only these trial IDs (--trial)
	Previous       map[string]*store.TrialRecord // records committed before (--resume), by ID; greedy reuses them
	NoisyCV        float64

	Progress     Progress
	TrialCommand func(id string) string // the command that re-runs one trial
}

// Runner runs one sweep.
type Runner struct {
	opts     Options
	launches int                           // launches started so far (progress)
	planned  int                           // launches planned so far (greedy adds each round's)
	records  map[string]*store.TrialRecord // committed (or reused) in this run
	prepared *launchRun                    // the next launch, prepared while the current one runs
	upcoming *nextLaunch                   // the launch to prepare during the next one (overlap), set by the batch
	lastEnd  time.Time                     // when the last launch ended (its timeline's end), or the run began
	commitMS float64                       // record commits since lastEnd
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
	if o.StoreHost == "" {
		o.StoreHost = "127.0.0.1"
	}
	if o.Retries < 0 {
		o.Retries = 0
	}
	o.Interleave = o.Interleave || o.Study.Workload.Interleave
	switch o.Overlap {
	case "":
		o.Overlap = OverlapOff
	case OverlapOff, OverlapOn, OverlapAA:
	default:
		return nil, fmt.Errorf("runner: overlap %q: use %s, %s or %s", o.Overlap, OverlapOff, OverlapOn, OverlapAA)
	}
	if o.Progress == nil {
		o.Progress = nopProgress{}
	}
	if o.TrialCommand == nil {
		o.TrialCommand = func(id string) string { return "casestudy run " + o.Study.Path + " --trial " + id }
	}
	return &Runner{opts: o, records: map[string]*store.TrialRecord{}}, nil
}

func (r *Runner) logf(format string, args ...any) { r.opts.Progress.Log(fmt.Sprintf(format, args...)) }

// Run executes the plan (or drives the greedy rounds) and commits every record.
// It returns ErrInterrupted after a signal, or the store's error when a record
// could not be committed (disk full): earlier records stay intact.
func (r *Runner) Run(ctx context.Context) (*Result, error) {
	r.lastEnd = time.Now()
	defer r.discardPrepared()
	res := &Result{Outcomes: map[store.Outcome]int{}}
	if err := r.commitDropped(r.opts.Plan.Dropped, res); err != nil {
		return res, err
	}
	if r.opts.Plan.Strategy == "greedy" && len(r.opts.Only) == 0 {
		return res, r.runGreedy(ctx, res)
	}
	_, err := r.runBatch(ctx, r.select_(r.opts.Plan.Trials), res)
	return res, err
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

// pending is a trial in flight inside a batch.
type pending struct {
	spec     *trialSpec
	rec      *store.TrialRecord
	launched int
	over     bool
}

// runBatch runs trials (all repeats each; round-robin with Interleave) and
// commits each record as soon as it is complete.
func (r *Runner) runBatch(ctx context.Context, trials []study.Trial, res *Result) ([]*store.TrialRecord, error) {
	o := &r.opts
	repeats := max(1, o.Study.Workload.Repeats)
	ps := make([]*pending, len(trials))
	for i, t := range trials {
		sp, err := buildSpec(o.Study, t, o.Machine)
		if err != nil {
			return nil, err
		}
		ps[i] = &pending{spec: sp, rec: &store.TrialRecord{ID: t.ID, Index: t.Index, Knobs: t.Knobs,
			Changed: t.Changed, FailedRank: -1, Command: o.TrialCommand(t.ID)}}
	}
	type job struct{ p, rep int }
	var jobs []job
	if o.Interleave {
		for rep := 0; rep < repeats; rep++ {
			for i := range ps {
				jobs = append(jobs, job{i, rep})
			}
		}
	} else {
		for i := range ps {
			for rep := 0; rep < repeats; rep++ {
				jobs = append(jobs, job{i, rep})
			}
		}
	}
	r.planned += len(jobs)
	var out []*store.TrialRecord
	finish := func(p *pending) error {
		p.over = true
		r.planned -= repeats - p.launched // repeats that will not launch now
		p.rec.Finished = time.Now().UTC()
		p.rec.Summary = stats.SummarizeTrial(p.rec.Repeats, stats.SummaryOptions{NoisyCV: o.NoisyCV})
		out = append(out, p.rec)
		return r.commit(p.rec, res)
	}
	// planNext names the launch after jobs[idx] (the next one that will
	// run, as far as it is known now) for preparing ahead.
	planNext := func(idx int) {
		for _, j := range jobs[idx+1:] {
			if q := ps[j.p]; !q.over && q.spec.Unsupported == "" {
				r.planNext(ps[jobs[idx].p].spec, q.spec, j.rep)
				return
			}
		}
		r.planNext(nil, nil, 0)
	}
	defer r.discardPrepared()
	for idx, j := range jobs {
		p := ps[j.p]
		if p.over {
			continue
		}
		if p.rec.Started.IsZero() {
			p.rec.Started = time.Now().UTC()
		}
		if p.spec.Unsupported != "" {
			p.rec.Outcome, p.rec.Error = store.Unsupported, p.spec.Unsupported
			if err := finish(p); err != nil {
				return out, err
			}
			continue
		}
		if ctx.Err() != nil {
			break
		}
		r.launches++
		p.launched++
		o.Progress.TrialStart(r.launches, r.planned, p.rec, j.rep, repeats)
		planNext(idx)
		rr, err := r.launchWithRetries(ctx, p, j.rep)
		if err != nil && ctx.Err() != nil {
			break // recorded interrupted below
		}
		if err != nil { // infrastructure failure after every retry
			p.rec.Outcome, p.rec.Error = store.Failed, err.Error()
			if err := finish(p); err != nil {
				return out, err
			}
			continue
		}
		p.rec.Repeats = append(p.rec.Repeats, rr.Rec)
		p.rec.Throttled = p.rec.Throttled || rr.Throttled
		if rr.Rec.Outcome != store.OK {
			p.rec.Outcome, p.rec.Error = rr.Rec.Outcome, rr.Rec.Error
			p.rec.FailedRank, p.rec.ExitCode, p.rec.Signal = rr.FailedRank, rr.ExitCode, rr.Signal
			if err := finish(p); err != nil {
				return out, err
			}
			if rr.Rec.Outcome == store.Interrupted {
				break
			}
			continue
		}
		if len(p.rec.Repeats) == repeats {
			p.rec.Outcome = store.OK
			if err := finish(p); err != nil {
				return out, err
			}
		}
	}
	if ctx.Err() != nil {
		// trials with some repeats done but not all: record them interrupted
		for _, p := range ps {
			if !p.over && !p.rec.Started.IsZero() {
				p.rec.Outcome, p.rec.Error = store.Interrupted, "stopped by a signal before its last repeat; --resume runs it again"
				if err := finish(p); err != nil {
					return out, err
				}
			}
		}
		return out, ErrInterrupted
	}
	return out, nil
}

// launchWithRetries runs one repeat, launching again after an infrastructure
// failure up to Retries more times.
func (r *Runner) launchWithRetries(ctx context.Context, p *pending, rep int) (*repeatResult, error) {
	var last error
	for attempt := 0; attempt <= r.opts.Retries; attempt++ {
		p.rec.Attempts++
		rr, err := r.runRepeat(ctx, p.spec, rep)
		if err == nil {
			return rr, nil
		}
		last = err
		r.logf("trial %s repeat %d: %v", p.rec.ID, rep, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, last
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
