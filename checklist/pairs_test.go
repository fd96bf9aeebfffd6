package checklist

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestPairsGrowLinearly (audit N3, L-5): a sweep of n values of one knob
// makes n-1 pairs (each value against the baseline's), not n(n-1)/2: at the
// plan limit of 20,000 trials every pair was 2·10^8 comparisons and 22.9 GB.
// The benchmark is scripts/bench-huge-run.sh (docs/perf.md).
func TestPairsGrowLinearly(t *testing.T) {
	const n = 400
	specs := make([]spec, n)
	for i := range specs {
		specs[i] = spec{id: fmt.Sprintf("t%03d", i), set: map[string]string{"micro_batch": fmt.Sprint(8 + i)},
			thr: 100 + float64(i%5), stepMS: 10, loss: 2, noise: 0.01, steps: 2}
	}
	v := newRunView(mkRun(specs))
	ps := v.pairs("micro_batch")
	assert.Len(t, ps, n-1)
	for _, p := range ps {
		assert.True(t, p.A.knob("micro_batch") == "8" || p.B.knob("micro_batch") == "8", "against the baseline value")
	}
	assert.Equal(t, []string{"micro_batch"}, v.varied())
	assert.Len(t, v.holm, n-1)

	// no trial holds a reference value: a star around the group's first trial
	for i := range specs {
		specs[i].set = map[string]string{"micro_batch": fmt.Sprint(100 + i)}
	}
	v = newRunView(mkRun(specs))
	ps = v.pairs("micro_batch")
	assert.Len(t, ps, n-1)
	assert.Equal(t, "t000", ps[0].A.ID)
}
