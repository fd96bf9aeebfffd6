package stats

import "math"

// DriftLimit is the steady-state check's limit: a launch whose last third of
// measured steps is on average more than 2% slower or faster than its first
// third is flagged unsteady. Warming GPUs drift 0.2-0.9% over a 50-step
// launch (docs/reports.md); more means the launch was not in a steady state
// (clock ramp, a host slow regime, a neighbour). Flagged launches are kept:
// no launch is dropped for its value.
const DriftLimit = 0.02

// minDriftSteps is the fewest measured steps the check judges (two per third).
const minDriftSteps = 6

// Drift is the relative change of mean step time over a launch's measured
// steps, stepMS in step order (one value a step: the slowest rank's, as
// measure.Drift takes them from a record), from the first third to the last
// third: +0.03 is 3% slower at the end. ok is false with fewer than 6 steps.
func Drift(stepMS []float64) (drift float64, ok bool) {
	n := len(stepMS)
	if n < minDriftSteps {
		return 0, false
	}
	third := n / 3
	first, last := mean(stepMS[:third]), mean(stepMS[n-third:])
	if first <= 0 {
		return 0, false
	}
	return last/first - 1, true
}

// Unsteady reports whether a launch's measured steps (as Drift takes them)
// failed the steady-state check.
func Unsteady(stepMS []float64) (float64, bool) {
	d, ok := Drift(stepMS)
	return d, ok && math.Abs(d) > DriftLimit
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
