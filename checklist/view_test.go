package checklist

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/casestudy/casestudy/store"
)

// TestTrialPrefersStoredSummary: the stored summary's numbers win over the raw
// steps; a field it lacks (0), or a missing summary, falls back to the steps.
func TestTrialPrefersStoredSummary(t *testing.T) {
	rec := func(sum *store.TrialSummary) *store.TrialRecord {
		r := &store.TrialRecord{ID: "t", Outcome: store.OK, Summary: sum}
		for rep, thr := range []float64{100, 110, 120} {
			rp := store.RepeatRecord{Repeat: rep, Outcome: store.OK, SamplesPerS: thr}
			rk := store.RankRecord{Rank: 0}
			for i, ms := range []float64{10, 12, 14} {
				rk.Steps = append(rk.Steps, stepMetrics{Step: i, StepMS: ms, CommMS: 2, MFU: 0.3, Loss: 5})
			}
			rp.Ranks = append(rp.Ranks, rk)
			r.Repeats = append(r.Repeats, rp)
		}
		return r
	}
	// throughput and noise always come from the launches (the report's
	// estimator: geometric mean, CV across launches), whatever the summary says
	geo := math.Cbrt(100 * 110 * 120)
	noise := cv([]float64{100, 110, 120})
	for _, tc := range []struct {
		name                   string
		sum                    *store.TrialSummary
		thr, stepMS, comm, mfu float64
		loss, noise            float64
	}{
		{"no summary: raw steps", nil, geo, 12, 2, 0.3, 5, noise},
		{"stored summary", &store.TrialSummary{SamplesPerS: 200, StepMSMedian: 7, CommMS: 1, MFU: 0.5, FinalLoss: 4, RepeatCV: 0.02},
			geo, 7, 1, 0.5, 4, noise},
		{"summary lacking fields", &store.TrialSummary{SamplesPerS: 200, StepCV: 0.09},
			geo, 12, 2, 0.3, 5, noise},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTrial(rec(tc.sum))
			assert.InDelta(t, tc.thr, tr.Throughput, 1e-9)
			assert.Equal(t, tc.stepMS, tr.StepMS)
			assert.Equal(t, tc.comm, tr.CommMS)
			assert.Equal(t, tc.mfu, tr.MFU)
			assert.Equal(t, tc.loss, tr.Loss)
			assert.InDelta(t, tc.noise, tr.Noise, 1e-12)
			assert.Equal(t, 9, tr.Measured)
			assert.False(t, math.IsNaN(tr.Noise))
		})
	}
}
