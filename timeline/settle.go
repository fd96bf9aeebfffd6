package timeline

import (
	"slices"
	"sort"
)

// SettleMargin is how far above the measured steps' own 90th percentile a
// step may be and still count as settled.
const SettleMargin = 0.05

// SettleStep is the first step (warm-up steps count from 0, the measured
// steps follow) from which the step times stay settled: from there on, the
// median of every three consecutive steps is at most the measured steps' 90th
// percentile plus SettleMargin. The 90th percentile keeps the regimes a
// host-bound launch switches between (25 vs 30 ms) inside the band; the
// median of three keeps one late hiccup (a page fault, a GC pause) from
// moving the answer. A value above the warm-up steps means warm-up was too
// short. -1 when there are fewer than three measured steps.
func SettleStep(warmup, measured []float64) int {
	if len(measured) < 3 {
		return -1
	}
	limit := percentile(measured, 0.9) * (1 + SettleMargin)
	seq := append(slices.Clone(warmup), measured...)
	n := len(seq)
	settled := n
	for i := n - 1; i >= 0; i-- {
		j := min(i, n-3) // the last steps share the last window
		if median3(seq[j:j+3]) > limit {
			break
		}
		settled = i
	}
	return settled
}

func median3(xs []float64) float64 {
	s := slices.Clone(xs)
	sort.Float64s(s)
	return s[1]
}

// percentile is the p-quantile of xs with linear interpolation.
func percentile(xs []float64, p float64) float64 {
	s := slices.Clone(xs)
	sort.Float64s(s)
	pos := p * float64(len(s)-1)
	i := int(pos)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (pos-float64(i))*(s[i+1]-s[i])
}
