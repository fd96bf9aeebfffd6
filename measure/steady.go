package measure

import (
	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/store"
)

// Drift is the relative change of mean step time (the slowest rank's, step by
// step) from the first third of a launch's measured steps to the last third:
// +0.03 is 3% slower at the end. ok is false with fewer than 6 steps
// (stats.Drift).
func Drift(r *store.RepeatRecord) (drift float64, ok bool) {
	return stats.Drift(stepTimes(r))
}

// Unsteady reports whether a launch failed the steady-state check
// (stats.Unsteady: a drift beyond stats.DriftLimit).
func Unsteady(r *store.RepeatRecord) (float64, bool) {
	return stats.Unsteady(stepTimes(r))
}

// stepTimes is, per measured step, the slowest rank's step time.
func stepTimes(r *store.RepeatRecord) []float64 {
	var out []float64
	for i := 0; ; i++ {
		var worst float64
		seen := false
		for _, rk := range r.Ranks {
			if i < len(rk.Steps) {
				seen = true
				worst = max(worst, rk.Steps[i].StepMS)
			}
		}
		if !seen {
			return out
		}
		out = append(out, worst)
	}
}
