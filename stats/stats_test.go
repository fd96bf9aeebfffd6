package stats

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/store"
)

func normal(r *rand.Rand, n int, mean, sd float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = mean + sd*r.NormFloat64()
	}
	return v
}

// The median's interval must hold the true median at least as often as its
// stated confidence (order-statistic intervals are exact, so 95% nominal).
func TestSummarizeCoverage(t *testing.T) {
	for _, n := range []int{8, 20, 60} {
		const seeds = 2000
		hit := 0
		for seed := range seeds {
			r := rand.New(rand.NewPCG(uint64(seed), uint64(n)))
			e := Summarize(normal(r, n, 100, 7))
			require.True(t, e.Bounded(), "n=%d", n)
			require.GreaterOrEqual(t, e.Confidence, Confidence)
			if e.Lo <= 100 && 100 <= e.Hi {
				hit++
			}
		}
		rate := float64(hit) / seeds
		assert.GreaterOrEqual(t, rate, 0.935, "n=%d coverage %.3f", n, rate)
		assert.LessOrEqual(t, rate, 0.995, "n=%d coverage %.3f: interval far too wide", n, rate)
	}
}

func TestSummarize(t *testing.T) {
	tests := []struct {
		description string
		values      []float64
		center      float64
		bounded     bool
		warning     string
	}{
		{"empty", nil, 0, false, "no samples"},
		{"three repeats are too few for a 95% interval", []float64{3, 1, 2}, 2, false, "need >= 6 samples"},
		{"six values give an interval", []float64{6, 5, 4, 3, 2, 1}, 3.5, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.description, func(t *testing.T) {
			in := append([]float64(nil), tt.values...)
			e := Summarize(tt.values)
			assert.Equal(t, in, tt.values, "input must not be reordered")
			assert.InDelta(t, tt.center, e.Center, 1e-12)
			assert.Equal(t, tt.bounded, e.Bounded())
			if tt.warning == "" {
				assert.Empty(t, e.Warnings)
			} else {
				require.NotEmpty(t, e.Warnings)
				assert.Contains(t, e.Warnings[0], tt.warning)
			}
		})
	}
}

func TestCompareSignificance(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	base := normal(r, 10, 1000, 10)
	tests := []struct {
		description string
		new         []float64
		significant bool
		text        string
	}{
		{"5% faster, tight", normal(r, 10, 1050, 10), true, "+"},
		{"5% slower, tight", normal(r, 10, 950, 10), true, "-"},
		{"same distribution", normal(r, 10, 1000, 10), false, "~"},
		{"big shift but three samples each", []float64{2000, 2001, 2002}, false, "~"},
	}
	for _, tt := range tests {
		t.Run(tt.description, func(t *testing.T) {
			old := base
			if len(tt.new) == 3 {
				old = base[:3]
			}
			d := Compare(old, tt.new)
			assert.Equal(t, tt.significant, d.Significant, "p=%v", d.P)
			assert.Contains(t, d.Text, tt.text)
			if len(tt.new) == 3 {
				require.NotEmpty(t, d.Warnings)
				assert.Contains(t, d.Warnings[0], "need >= 4 samples")
			}
		})
	}
}

// Under the null hypothesis the test must not cry wolf much more than alpha.
func TestCompareFalsePositiveRate(t *testing.T) {
	const seeds = 400
	fp := 0
	for seed := range seeds {
		r := rand.New(rand.NewPCG(uint64(seed), 99))
		if Compare(normal(r, 10, 50, 3), normal(r, 10, 50, 3)).Significant {
			fp++
		}
	}
	assert.LessOrEqual(t, float64(fp)/seeds, 0.075)
}

func TestSpeedupCoverage(t *testing.T) {
	const seeds = 1000
	hit := 0
	for seed := range seeds {
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		s := NewSpeedup(normal(r, 12, 150, 6), normal(r, 12, 100, 4), true)
		require.False(t, math.IsInf(s.Lo, 0))
		if s.Lo <= 1.5 && 1.5 <= s.Hi {
			hit++
		}
		require.True(t, s.Significant)
	}
	assert.GreaterOrEqual(t, float64(hit)/seeds, 0.90)
}

func TestSpeedupOrientation(t *testing.T) {
	// Step times: best is 80 ms, baseline 100 ms: 1.25x.
	best := []float64{80, 80, 80, 80, 80, 80, 80}
	base := []float64{100, 100, 100, 100, 100, 100, 100}
	s := NewSpeedup(best, base, false)
	assert.InDelta(t, 1.25, s.Ratio, 1e-12)
	assert.InDelta(t, 1.25, s.Lo, 1e-12)
	assert.GreaterOrEqual(t, s.Confidence, 0.90)

	few := NewSpeedup([]float64{2, 2, 2}, []float64{1, 1, 1}, true)
	assert.InDelta(t, 2.0, few.Ratio, 1e-12)
	assert.True(t, math.IsInf(few.Hi, 1))
	require.NotEmpty(t, few.Warnings)
	assert.Contains(t, few.Warnings[0], "unbounded")
}

func TestJSONInfinity(t *testing.T) {
	e := Summarize([]float64{1, 2})
	b, err := json.Marshal(e)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"lo":null`)
	var back Estimate
	require.NoError(t, json.Unmarshal(b, &back))
	assert.True(t, math.IsInf(back.Lo, -1))
	assert.True(t, math.IsInf(back.Hi, 1))
	assert.Equal(t, e.Center, back.Center)

	s := NewSpeedup([]float64{2}, []float64{1}, true)
	b, err = json.Marshal(s)
	require.NoError(t, err)
	var sb Speedup
	require.NoError(t, json.Unmarshal(b, &sb))
	assert.True(t, math.IsInf(sb.Hi, 1))
}

func step(ms float64, samples int) engine.StepMetrics {
	return engine.StepMetrics{StepMS: ms, Samples: samples}
}

func TestTrialSamples(t *testing.T) {
	rep := func(outcome store.Outcome, tp float64, rank0, rank1 []engine.StepMetrics) store.RepeatRecord {
		return store.RepeatRecord{Outcome: outcome, SamplesPerS: tp, Ranks: []store.RankRecord{
			{Rank: 0, Steps: rank0}, {Rank: 1, Steps: rank1}}}
	}
	two := []engine.StepMetrics{step(100, 8), step(200, 8)}
	slow := []engine.StepMetrics{step(125, 8), step(100, 8)}

	tr := &store.TrialRecord{Repeats: []store.RepeatRecord{
		rep(store.OK, 90, two, slow), rep(store.Failed, 0, nil, nil), rep(store.OK, 110, two, slow)}}
	s := TrialSamples(tr)
	assert.Equal(t, FromRepeats, s.Source)
	assert.Equal(t, []float64{90, 110}, s.Throughput)
	assert.Equal(t, []float64{162.5, 162.5}, s.StepMS) // median of max(100,125), max(200,100)

	tr = &store.TrialRecord{Repeats: []store.RepeatRecord{rep(store.OK, 90, two, slow)}}
	s = TrialSamples(tr)
	assert.Equal(t, FromSteps, s.Source)
	assert.Equal(t, []float64{125, 200}, s.StepMS)
	assert.InDeltaSlice(t, []float64{16 / 0.125, 16 / 0.2}, s.Throughput, 1e-9)

	s = TrialSamples(&store.TrialRecord{Repeats: []store.RepeatRecord{rep(store.OOM, 0, nil, nil)}})
	assert.Equal(t, NoSamples, s.Source)
	assert.Empty(t, s.Throughput)
}
