package runner

import (
	"context"
	"time"

	"github.com/casestudy/casestudy/measure"
	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/study"
)

// pending is a trial in flight inside a batch.
type pending struct {
	spec       *trialSpec
	rec        *store.TrialRecord
	relaunched int // extra launches that replaced tainted ones
	over       bool
}

// runBatch runs trials as the design's schedule says (stats.Schedule):
// rounds of launches, each trial committed as soon as it stops (decided, all
// its launches ran, failed, or the time budget is spent).
func (r *Runner) runBatch(ctx context.Context, trials []study.Trial, res *Result) ([]*store.TrialRecord, error) {
	o := &r.opts
	ps := map[string]*pending{}
	var ids []string
	var out []*store.TrialRecord
	finish := func(p *pending) error {
		p.over = true
		p.rec.Finished = time.Now().UTC()
		p.rec.Summary = measure.SummarizeTrial(p.rec.Repeats, measure.SummaryOptions{NoisyCV: o.NoisyCV, Metric: r.metric})
		out = append(out, p.rec)
		return r.commit(p.rec, res)
	}
	symmetric := sweepsNCCL(o.Plan)
	for _, t := range trials {
		sp, err := buildSpec(o.Study, t, o.Machine)
		if err != nil {
			return nil, err
		}
		if symmetric && !sp.NCCLEvidence { // the same NCCL logging as the trials that force a knob
			sp.NCCLEvidence = true
			sp.setNCCLDebug()
		}
		p := &pending{spec: sp, rec: &store.TrialRecord{ID: t.ID, Index: t.Index, Knobs: t.Knobs,
			Changed: t.Changed, FailedRank: -1, Command: o.TrialCommand(t.ID)}}
		if sp.Unsupported != "" {
			now := time.Now().UTC()
			p.rec.Started, p.rec.Outcome, p.rec.Error = now, store.Unsupported, sp.Unsupported
			if err := finish(p); err != nil {
				return out, err
			}
			continue
		}
		ps[t.ID] = p
		ids = append(ids, t.ID)
	}
	if len(ids) == 0 {
		return out, nil
	}
	sched := r.schedule(ids)
	repeats := o.Design.Repeats
	if o.Design.Auto {
		repeats = o.Design.MaxRepeats
	}
	commitStopped := func() error {
		for _, id := range ids {
			p := ps[id]
			if why := sched.Stopped(id); why != "" && !p.over {
				if p.rec.Outcome == "" {
					p.rec.Outcome = store.OK
				}
				if p.rec.Outcome == store.OK {
					p.rec.Stopped = why
				}
				if err := finish(p); err != nil {
					return err
				}
			}
		}
		return nil
	}
	defer r.discardPrepared()
	for round := sched.NextRound(); round != nil; round = sched.NextRound() {
		if err := commitStopped(); err != nil {
			return out, err
		}
		if r.overBudget(len(round)) {
			r.logf("time budget of %s spent: no further round (%s so far)", time.Duration(o.Design.MaxTimeS*float64(time.Second)),
				time.Since(r.start).Round(time.Second))
			sched.StopAll(stats.StopBudget)
			break
		}
		if err := r.preheat(ctx, ps[round[0]]); err != nil && ctx.Err() != nil {
			break
		}
		for i, id := range round {
			if ctx.Err() != nil {
				break
			}
			p := ps[id]
			if p.over || sched.Stopped(id) != "" {
				continue
			}
			r.planNextLaunch(p, round[i+1:], ids, ps, sched)
			r.launchCounted(ctx, p, sched, repeats)
			if err := commitStopped(); err != nil { // a trial is committed as soon as it stops
				return out, err
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	if ctx.Err() != nil {
		// trials with some launches done but not stopped: record them interrupted
		for _, id := range ids {
			p := ps[id]
			if !p.over && sched.Stopped(id) == "" && !p.rec.Started.IsZero() {
				if p.rec.Outcome != store.Interrupted { // stopEnvironment said why
					p.rec.Outcome, p.rec.Error = store.Interrupted, "stopped by a signal before its last launch; --resume runs it again"
				}
				if err := finish(p); err != nil {
					return out, err
				}
			}
		}
		if err := commitStopped(); err != nil {
			return out, err
		}
		return out, ErrInterrupted
	}
	return out, commitStopped()
}

// schedule is the batch's schedule: its reference is the plan's baseline
// trial, measured in this batch or before (greedy's later rounds, a resumed
// run), by the study's objective.
func (r *Runner) schedule(ids []string) *stats.Schedule {
	o := &r.opts
	base := o.Plan.BaselineID
	var frozen []float64
	if rec := r.record(base); rec != nil && rec.Outcome == store.OK {
		frozen = measure.TrialLaunches(rec, r.metric).Values
	}
	threshold := o.Study.Compare.Threshold
	if threshold <= 0 {
		threshold = defaultThreshold
	}
	return stats.NewSchedule(*o.Design, threshold, ids, base, frozen)
}

// defaultThreshold is δ when the study sets no compare.threshold (the
// report's DefaultThreshold).
const defaultThreshold = 0.05

// overBudget reports whether a round of n launches would end past the time
// budget, at the mean launch time so far.
func (r *Runner) overBudget(n int) bool {
	budget := time.Duration(r.opts.Design.MaxTimeS * float64(time.Second))
	if budget <= 0 || r.launches == 0 {
		return false
	}
	per := r.spent / time.Duration(r.launches)
	return time.Since(r.start)+per*time.Duration(n) > budget
}

// preheatSteps caps the steps after the warm-up of the pre-heat launch: it
// warms the GPU's clocks and the machine's caches (kernels compiled, cuDNN's
// plans), which its start-up and warm-up do; steps past those would be
// measured and thrown away.
const preheatSteps = 5

// preheat runs one unmeasured launch of p's trial before the run's first
// measured launch, when the design asks for it (GPUs), its warm-up and at
// most preheatSteps steps; its measurement is thrown away (no repeat, no
// statistics), its logs are kept as preheat logs and its timeline as the
// trial record's preheat, so that the run's timelines still add up to its
// wall time.
func (r *Runner) preheat(ctx context.Context, p *pending) error {
	if r.preheated || !r.opts.Design.Preheat || p == nil {
		return nil
	}
	r.preheated = true
	r.planNext(nil, nil, 0)
	r.logf("pre-heat: one unmeasured launch of trial %s warms the GPU before the first measured launch", p.rec.ID)
	begin := time.Now()
	rr, err := r.runRepeat(ctx, p.spec, store.PreheatRepeat)
	if rr != nil {
		p.rec.Preheat = rr.Rec.Timeline
	}
	r.logf("pre-heat done in %s", time.Since(begin).Round(100*time.Millisecond))
	return err
}

// planNextLaunch names the launch to prepare while p's runs (overlap): the
// next trial of the round still launching. Past the round's end the next
// launch is known only with a fixed number of repeats: the trials that still
// need launches after this round, taken in order without interleaving (one
// launch a round), or the only one left with it (a round's order is random).
// repeats: auto decides its rounds from the results, so nothing is prepared
// across them. A wrong guess (a failure, a tainted launch relaunched) costs
// only the discarded preparation.
func (r *Runner) planNextLaunch(p *pending, rest, ids []string, ps map[string]*pending, sched *stats.Schedule) {
	for _, id := range rest {
		if q := ps[id]; !q.over && sched.Stopped(id) == "" {
			r.planNext(p.spec, q.spec, len(q.rec.Repeats))
			return
		}
	}
	if d := r.opts.Design; !d.Auto {
		var next []*pending
		for _, id := range ids {
			q := ps[id]
			n := len(q.rec.Repeats) // launches after this one
			if q == p {
				n++
			}
			if !q.over && sched.Stopped(id) == "" && n < d.Repeats {
				next = append(next, q)
			}
		}
		if len(next) == 1 || (len(next) > 1 && !d.Interleave) {
			q := next[0]
			rep := len(q.rec.Repeats)
			if q == p {
				rep++
			}
			r.planNext(p.spec, q.spec, rep)
			return
		}
	}
	r.planNext(nil, nil, 0)
}

// launchCounted launches one repeat of p (and up to the design's
// relaunches when it comes back tainted), records it and tells the
// schedule (a failed launch stops the trial).
func (r *Runner) launchCounted(ctx context.Context, p *pending, sched *stats.Schedule, repeats int) {
	o := &r.opts
	for {
		if p.rec.Started.IsZero() {
			p.rec.Started = time.Now().UTC()
		}
		rep := len(p.rec.Repeats)
		r.launches++
		o.Progress.TrialStart(r.launches, r.launches-1+sched.Remaining(), p.rec, rep, repeats) // Remaining counts this launch: not added yet
		begin := time.Now()
		rr, err := r.launchWithRetries(ctx, p, rep)
		r.spent += time.Since(begin)
		if err != nil && ctx.Err() != nil {
			return // recorded interrupted by the caller
		}
		if err != nil { // infrastructure failure after every retry: the environment, not the trial
			r.stopEnvironment(p, err)
			return
		}
		if rr.halt != nil { // the engine library or the allocation went away mid-run
			p.rec.Repeats = append(p.rec.Repeats, rr.Rec)
			r.stopEnvironment(p, rr.halt)
			return
		}
		if o.measured != nil {
			o.measured(&rr.Rec)
		}
		p.rec.Repeats = append(p.rec.Repeats, rr.Rec)
		p.rec.Throttled = p.rec.Throttled || rr.Throttled
		if rr.Rec.Outcome != store.OK {
			p.rec.Outcome, p.rec.Error = rr.Rec.Outcome, rr.Rec.Error
			p.rec.FailedRank, p.rec.ExitCode, p.rec.Signal = rr.FailedRank, rr.ExitCode, rr.Signal
			sched.Stop(p.rec.ID, stats.StopFailed)
			return
		}
		if d, bad := measure.Unsteady(&rr.Rec); bad {
			r.logf("trial %s launch %d is not steady: its last third of steps ran %+.1f%% against the first (kept)", p.rec.ID, rep, 100*d)
		}
		if rr.Rec.Tainted != "" {
			if p.relaunched < o.Design.MaxRelaunches && ctx.Err() == nil {
				p.relaunched++
				r.logf("trial %s launch %d is tainted (%s): left out of the statistics and launched again (%d of %d)",
					p.rec.ID, rep, rr.Rec.Tainted, p.relaunched, o.Design.MaxRelaunches)
				continue
			}
			r.logf("trial %s launch %d is tainted (%s): left out of the statistics; no relaunch left", p.rec.ID, rep, rr.Rec.Tainted)
			sched.Add(p.rec.ID, 0, false)
			return
		}
		v, ok := measure.LaunchValue(r.metric, &rr.Rec)
		sched.Add(p.rec.ID, v, ok)
		return
	}
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
