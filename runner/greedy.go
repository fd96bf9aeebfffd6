package runner

import (
	"context"
	"fmt"
	"math"

	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/study"
)

// runGreedy drives coordinate descent: each round tunes one knob, runs its
// trials (reusing any already measured) and carries the best value forward.
func (r *Runner) runGreedy(ctx context.Context, res *Result) error {
	g, err := study.NewGreedy(r.opts.Study)
	if err != nil {
		return err
	}
	for round := 1; ; round++ {
		knob, trials, done := g.Next()
		if done {
			return nil
		}
		if round > 1 {
			if err := r.commitDropped(g.Dropped(), res); err != nil {
				return err
			}
		}
		var todo []study.Trial
		for _, t := range trials {
			if r.records[t.ID] == nil && r.opts.Previous[t.ID] == nil {
				todo = append(todo, t)
			}
		}
		if _, err := r.runBatch(ctx, todo, res); err != nil {
			return err
		}
		best, val := "", math.NaN()
		for _, t := range trials {
			v, ok := r.objective(r.record(t.ID))
			if ok && (math.IsNaN(val) || better(v, val, r.goal())) {
				best, val = t.ID, v
			}
		}
		if best == "" {
			r.logf("greedy round %d (%s): no trial succeeded; keeping the current value", round, knob)
			best = trials[0].ID
		} else {
			r.logf("greedy round %d (%s): best %s (%s %.4g)", round, knob, best, r.metric(), val)
		}
		if err := g.Choose(best); err != nil {
			return fmt.Errorf("greedy round %d: %w", round, err)
		}
	}
}

// record is this run's record of id, or the one committed before a resume.
func (r *Runner) record(id string) *store.TrialRecord {
	if rec := r.records[id]; rec != nil {
		return rec
	}
	return r.opts.Previous[id]
}

func (r *Runner) metric() string {
	if m := r.opts.Study.Objective.Metric; m != "" {
		return m
	}
	return "throughput"
}

func (r *Runner) goal() string {
	if g := r.opts.Study.Objective.Goal; g != "" {
		return g
	}
	switch r.metric() {
	case "step_time", "memory", "mem_peak":
		return "min"
	}
	return "max"
}

func better(v, than float64, goal string) bool {
	if goal == "min" {
		return v < than
	}
	return v > than
}

// objective reads the study's objective metric from an ok trial's summary.
func (r *Runner) objective(rec *store.TrialRecord) (float64, bool) {
	if rec == nil || rec.Outcome != store.OK || rec.Summary == nil {
		return 0, false
	}
	s := rec.Summary
	switch r.metric() {
	case "throughput", "samples_per_s":
		return s.SamplesPerS, true
	case "tokens_per_s":
		return s.TokensPerS, true
	case "step_time", "step_ms":
		return s.StepMSMedian, true
	case "mfu":
		return s.MFU, true
	case "tflops":
		return s.TFLOPS, true
	case "memory", "mem_peak":
		return float64(s.MemPeakBytes), true
	}
	return s.SamplesPerS, true
}
