package stats

import (
	"math"

	"github.com/casestudy/casestudy/store"
)

// DriftLimit is the steady-state check's limit: a launch whose last third of
// measured steps is on average more than 2% slower or faster than its first
// third is flagged unsteady. Warming GPUs drift 0.2-0.9% over a 50-step
// launch (docs/reports.md); more means the launch was not in a steady state
// (clock ramp, a host slow regime, a neighbour). Flagged launches are kept:
// no launch is dropped for its value.
const DriftLimit = 0.02

// minDriftSteps is the fewest measured steps the check judges (two per third).
const minDriftSteps = 6

// Drift is the relative change of mean step time (the slowest rank's, step by
// step) from the first third of a launch's measured steps to the last third:
// +0.03 is 3% slower at the end. ok is false with fewer than 6 steps.
func Drift(r *store.RepeatRecord) (drift float64, ok bool) {
	st := stepTimes(r)
	n := len(st)
	if n < minDriftSteps {
		return 0, false
	}
	third := n / 3
	first, last := mean(st[:third]), mean(st[n-third:])
	if first <= 0 {
		return 0, false
	}
	return last/first - 1, true
}

// Unsteady reports whether a launch failed the steady-state check.
func Unsteady(r *store.RepeatRecord) (float64, bool) {
	d, ok := Drift(r)
	return d, ok && math.Abs(d) > DriftLimit
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
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
