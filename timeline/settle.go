package timeline

import (
	"math"
	"slices"
)

// SettleMargin is the least a step may be slower than the measured steps'
// median and still count as settled.
const SettleMargin = 0.05

// SettleStep is the step (warm-up steps count from 0, the measured steps
// follow) from which the step times settled, judged at the start of the
// measured window: one past the last slow step (above SettleLimit(measured))
// of the run of slow steps that reaches from the warm-up into the window,
// allowing gaps of fewer than SettleReach steps and ignoring isolated
// hiccups (one slow step between settled ones: a page fault, a GC pause).
// Slow steps later in the window are not warm-up: on a GPU they are the
// power limiter engaging after about a second of load (LateSlowdown). A
// value above the warm-up steps means the warm-up was too short. -1 when
// there are fewer than three measured steps.
func SettleStep(warmup, measured []float64) int {
	if len(measured) < 3 {
		return -1
	}
	limit := SettleLimit(measured)
	seq := append(slices.Clone(warmup), measured...)
	n := len(seq)
	slow := func(i int) bool { return i >= 0 && i < n && seq[i] > limit }
	settled := 0
	for i := range seq {
		if i >= max(len(warmup), settled)+SettleReach {
			break // past the window's start: later slow steps are slow-downs, not warm-up
		}
		isolated := i > 0 && !slow(i-1) && !slow(i+1)
		if slow(i) && !isolated {
			settled = i + 1
		}
	}
	return settled
}

// SettleReach is how far past the warm-up (or past the last slow step still
// settling) SettleStep looks for the warm-up's slow steps.
const SettleReach = 5

// LateSlowdown reports whether the launch slowed down after it settled: a
// run of two or more slow steps (above SettleLimit) after SettleStep. On a
// GPU that is the power limiter engaging partway through the window.
func LateSlowdown(warmup, measured []float64) bool {
	at := SettleStep(warmup, measured)
	if at < 0 {
		return false
	}
	limit := SettleLimit(measured)
	seq := append(slices.Clone(warmup), measured...)
	for i := max(at, len(warmup)); i+1 < len(seq); i++ {
		if seq[i] > limit && seq[i+1] > limit {
			return true
		}
	}
	return false
}

// SettleLimit is the slowest a settled step may be: the measured steps'
// median plus the larger of SettleMargin and three robust standard
// deviations (1.4826 × the median absolute deviation), so that the two
// regimes a host-bound launch switches between (25 vs 30 ms) both count as
// settled.
func SettleLimit(measured []float64) float64 {
	ref := median(measured)
	dev := make([]float64, len(measured))
	for i, x := range measured {
		dev[i] = math.Abs(x - ref)
	}
	spread := 3 * 1.4826 * median(dev)
	return ref * (1 + max(SettleMargin, spread/ref))
}
