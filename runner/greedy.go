package runner

import (
	"context"
	"fmt"

	"github.com/casestudy/casestudy/measure"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/study"
)

// runGreedy drives coordinate descent: each round tunes one knob, runs its
// trials (reusing any already measured) and carries the best value forward
// (measure.Best: the report's and the checklist's definition of best).
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
		recs := make([]*store.TrialRecord, len(trials))
		for i, t := range trials {
			recs[i] = r.record(t.ID)
		}
		best := ""
		if i := measure.Best(recs, r.metric); i < 0 {
			r.logf("greedy round %d (%s): no trial succeeded; keeping the current value", round, knob)
			best = trials[0].ID
		} else {
			best = trials[i].ID
			r.logf("greedy round %d (%s): best %s (%s)", round, knob, best, ValueText(recs[i].Summary))
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
