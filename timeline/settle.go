package timeline

import (
	"math"
	"slices"
)

// SettleMargin is the least a step may be slower than the measured steps'
// median and still count as settled.
const SettleMargin = 0.05

// SettleStep is the step (warm-up steps count from 0, the measured steps
// follow) from which the step times stay settled: every later step is at
// most SettleLimit(measured), except isolated hiccups (one slow step between
// settled ones: a page fault, a GC pause). A value above the warm-up steps
// means the warm-up was too short; len(warmup)+len(measured) means the
// launch never settled. -1 when there are fewer than three measured steps.
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
		isolated := i > 0 && !slow(i-1) && !slow(i+1)
		if slow(i) && !isolated {
			settled = i + 1
		}
	}
	return settled
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
