package report

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	meas "github.com/casestudy/casestudy/measure"
	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/stats/synth"
	"github.com/casestudy/casestudy/store"
)

// synthRun is a summary of trials drawn from models, n launches each.
func synthRun(r *rand.Rand, models []synth.Model, n int) *Summary {
	s := &Summary{Metric: stats.Metrics["throughput"], Comparable: Comparable{Model: "gpt/124m", Workload: "cuda, 50 steps after 5 warm-up",
		GPU: "NVIDIA H200", Metric: "throughput"}}
	for i, m := range models {
		v := m.Launches(r, n)
		s.Trials = append(s.Trials, Trial{ID: strconv.Itoa(i), Outcome: store.OK, Launches: meas.Launches{Values: v},
			Value: stats.ValueOf(v, 0.95)})
	}
	return s
}

// TestSimulatedGate: compare as a nightly gate over a 10-trial study with 3
// launches a trial, on launches calibrated on the H200 run: two runs of the
// same configurations raise an alarm at most 6% of the time (Holm over the
// trials keeps the whole gate at the nominal 5%), and a trial 30% slower is
// caught at least 97% of the time (stats.TestSimulatedGateNights has the
// H100's noise, history and one launch a side).
func TestSimulatedGate(t *testing.T) {
	for _, m := range []struct {
		name  string
		model synth.Model
	}{{"typical", synth.Typical}, {"host slow regimes", synth.Host}} {
		models := make([]synth.Model, 10)
		for i := range models {
			models[i] = m.model.Scaled(1 + 0.1*float64(i))
		}
		slower := append([]synth.Model(nil), models...)
		slower[7] = models[7].Scaled(0.7)
		r := rand.New(rand.NewPCG(7, uint64(len(m.name))))
		const n = 200
		alarms, caught := 0, 0
		for range n {
			c, err := Compare(synthRun(r, models, 3), synthRun(r, models, 3), "a", "b", 0.05)
			require.NoError(t, err)
			if len(c.Regressions) > 0 {
				alarms++
			}
			c, err = Compare(synthRun(r, models, 3), synthRun(r, slower, 3), "a", "b", 0.05)
			require.NoError(t, err)
			if slices.Contains(c.Regressions, "7") {
				caught++
			}
		}
		t.Logf("gate, %s, 10 trials x 3 launches: false alarms %.1f%%, 30%% drop caught %.1f%%", m.name,
			100*float64(alarms)/n, 100*float64(caught)/n)
		assert.LessOrEqual(t, float64(alarms)/n, 0.06, m.name)
		assert.GreaterOrEqual(t, float64(caught)/n, 0.97, m.name)
	}
}

// TestSimulatedImprovements: "faster by more than δ" is corrected for the
// number of trials. Ten trials exactly 1+δ faster, 3 launches a side at the
// H200-calibrated noise: at least one called an improvement in at most 8% of
// runs (Holm over the one-sided tests against 1+δ; on each row's own 90%
// interval it was about 40%), while a trial 25% faster among them is still
// called one in at least 90%.
func TestSimulatedImprovements(t *testing.T) {
	models := make([]synth.Model, 10)
	for i := range models {
		models[i] = synth.Typical.Scaled(1 + 0.1*float64(i))
	}
	edge, faster := make([]synth.Model, 10), append([]synth.Model(nil), models...)
	for i, m := range models {
		edge[i] = m.Scaled(1.05)
	}
	faster[3] = models[3].Scaled(1.25)
	r := rand.New(rand.NewPCG(8, 1))
	const n = 400
	false_, caught := 0, 0
	for range n {
		c, err := Compare(synthRun(r, models, 3), synthRun(r, edge, 3), "a", "b", 0.05)
		require.NoError(t, err)
		if len(c.Improvements) > 0 {
			false_++
		}
		c, err = Compare(synthRun(r, models, 3), synthRun(r, faster, 3), "a", "b", 0.05)
		require.NoError(t, err)
		if slices.Contains(c.Improvements, "3") {
			caught++
		}
	}
	t.Logf("improvements, 10 trials x 3 launches: at exactly 1.05x %.1f%% of runs call one, 1.25x caught %.1f%%",
		100*float64(false_)/n, 100*float64(caught)/n)
	assert.LessOrEqual(t, float64(false_)/n, 0.08)
	assert.GreaterOrEqual(t, float64(caught)/n, 0.90)
}
