package measure

import (
	"time"

	"github.com/casestudy/casestudy/store"
)

// WindowBasis is RepeatRecord.Basis for a launch whose throughput is its
// samples over the measured window's wall clock (WindowThroughput); an empty
// basis is the older one, samples over the slowest rank's summed step times
// (Throughput).
const WindowBasis = "window"

// WindowThroughput is every rank's measured samples (and tokens) over the
// measured window's wall clock, from the first rank's start of its measured
// steps to the last rank's end of them. Unlike Throughput (summed step times)
// it counts what sustained training pays between the engine's calls
// (read-back, the return to Go, the next call's batches): summed step times
// were 95-99.9% of the window on the H100, a different share per trial
// (../shared/brief/verdicts-review.md §5.1). ok is false when the window is
// empty or nothing was measured.
func WindowThroughput(ranks []store.RankRecord, window time.Duration) (samplesPerS, tokensPerS float64, ok bool) {
	if window <= 0 {
		return 0, 0, false
	}
	var samples, tokens int64
	for _, r := range ranks {
		for _, s := range r.Steps {
			samples += int64(s.Samples)
			tokens += int64(s.Tokens)
		}
	}
	if samples == 0 {
		return 0, 0, false
	}
	sec := window.Seconds()
	return float64(samples) / sec, float64(tokens) / sec, true
}

// ClockDeficit is a launch's power-limit summary: the largest clock deficit
// (1 − mean SM clock / max SM clock) and power-cap share of the measured
// window over its GPUs; ok is false without throttle counters (CPU runs).
func ClockDeficit(th *store.Throttle) (deficit, powerCap float64, ok bool) {
	if th == nil || len(th.GPUs) == 0 {
		return 0, 0, false
	}
	for _, g := range th.GPUs {
		deficit = max(deficit, g.ClockDeficit)
		powerCap = max(powerCap, g.PowerCap)
	}
	return deficit, powerCap, true
}
