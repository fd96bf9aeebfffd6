package stats

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	mstats "github.com/aclements/go-moremath/stats"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func normal(r *rand.Rand, n int, mean, sd float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = mean + sd*r.NormFloat64()
	}
	return v
}

// TestWelchMatchesR: R's t.test(extra ~ group, data = sleep) (Welch):
// t = -1.8608, df = 17.776, p-value = 0.07939, 95% CI -3.3654832 0.2054832.
func TestWelchMatchesR(t *testing.T) {
	g1 := []float64{0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0}
	g2 := []float64{1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4}
	d, hw, p, df, err := welch(mstats.Sample{Xs: g1}, mstats.Sample{Xs: g2}, 0.95, false)
	require.NoError(t, err)
	assert.InDelta(t, 17.776, df, 5e-4)
	assert.InDelta(t, 0.07939, p, 5e-6)
	assert.InDelta(t, -3.3654832, d-hw, 5e-7)
	assert.InDelta(t, 0.2054832, d+hw, 5e-7)
	// t.test(extra ~ group, data = sleep, var.equal = TRUE): t = -1.8608,
	// df = 18, p-value = 0.07919, 95% CI -3.363874 0.203874
	d, hw, p, df, err = welch(mstats.Sample{Xs: g1}, mstats.Sample{Xs: g2}, 0.95, true)
	require.NoError(t, err)
	assert.Equal(t, 18.0, df)
	assert.InDelta(t, 0.07919, p, 5e-6)
	assert.InDelta(t, -3.363874, d-hw, 5e-7)
	assert.InDelta(t, 0.203874, d+hw, 5e-7)
}

// TestCompareOrientation: better > 1 whatever the direction of the metric.
func TestCompareOrientation(t *testing.T) {
	fast, slow := []float64{120, 121, 119}, []float64{100, 101, 99}
	lv := Level{Confidence: 0.95, Threshold: 0.05}
	c := Compare(fast, slow, Metrics["throughput"], lv)
	assert.InDelta(t, 1.2, c.Ratio, 0.01)
	assert.Equal(t, Better, c.Verdict)
	assert.Equal(t, "faster by more than 5%", c.VerdictText())
	// step time: the trial with the shorter step is faster
	c = Compare([]float64{10, 10.1, 9.9}, []float64{12, 12.1, 11.9}, Metrics["step_time"], lv)
	assert.InDelta(t, 1.2, c.Ratio, 0.01)
	assert.Equal(t, Better, c.Verdict)
	assert.Less(t, c.Lo, c.Ratio)
	assert.Greater(t, c.Hi, c.Ratio)
	// memory: deterministic values compare exactly
	c = Compare([]float64{8 << 30, 8 << 30}, []float64{6 << 30, 6 << 30}, Metrics["memory"], lv)
	assert.Equal(t, Worse, c.Verdict)
	assert.Equal(t, "more memory by more than 5%", c.VerdictText())
	assert.InDelta(t, 0.75, c.Lo, 1e-12)
}

func TestVerdicts(t *testing.T) {
	lv := Level{Confidence: 0.95, Threshold: 0.05}
	tests := []struct {
		name        string
		trial, base []float64
		verdict     Verdict
		text        string
	}{
		{"one launch: estimate only", []float64{130}, []float64{100, 101, 99}, Undecided, "undecided (one launch: estimate only)"},
		{"one baseline launch", []float64{130, 131}, []float64{100}, Undecided, "undecided (one launch: estimate only)"},
		{"nothing", nil, []float64{100}, Undecided, "undecided (nothing to compare)"},
		{"slower", []float64{70, 71, 69}, []float64{100, 101, 99}, Worse, "slower by more than 5%"},
		{"same, tight", []float64{100.5, 100, 99.5, 100.2}, []float64{100, 100.4, 99.6, 99.9}, NoDifference, "within ±5%"},
		{"same, noisy", []float64{90, 110, 100}, []float64{95, 105, 100}, Undecided, "undecided (needs ~"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Compare(tt.trial, tt.base, Metrics["throughput"], lv)
			assert.Equal(t, tt.verdict, c.Verdict, c.Text())
			assert.Contains(t, c.VerdictText(), tt.text)
			if len(tt.trial) < 2 || len(tt.base) < 2 {
				assert.False(t, c.Bounded())
				assert.True(t, math.IsNaN(c.P))
				assert.Equal(t, "no p-value", c.PText())
			}
		})
	}
}

// TestMoreLaunchesEstimate: the estimate is what it says: with the same
// spreads and effect, that many more launches decide.
func TestMoreLaunchesEstimate(t *testing.T) {
	lv := Level{Confidence: 0.95, Threshold: 0.05}
	r := rand.New(rand.NewPCG(3, 4))
	for range 50 {
		sd := 0.01 + 0.05*r.Float64()
		eff := 0.2 * r.Float64()
		x, y := normal(r, 3, 0, sd), normal(r, 3, 0, sd)
		trial, base := make([]float64, 3), make([]float64, 3)
		for i := range x {
			trial[i], base[i] = 100*math.Exp(eff+x[i]), 100*math.Exp(y[i])
		}
		c := Compare(trial, base, Metrics["throughput"], lv)
		if c.Settled() || c.MoreLaunches == 0 || c.MoreLaunches >= maxMore {
			continue
		}
		// grow both sides with their own mean and spread exactly preserved
		n := 3 + c.MoreLaunches
		grow := func(v []float64) []float64 {
			s := mstats.Sample{Xs: logs(v)}
			m, sd := s.Mean(), s.StdDev()
			out := make([]float64, n)
			for i := range out { // ±1 pattern with the same mean and sample sd
				z := 1.0
				if i%2 == 1 {
					z = -1
				}
				if n%2 == 1 && i == n-1 {
					z = 0
				}
				out[i] = z
			}
			zs := mstats.Sample{Xs: append([]float64(nil), out...)}
			zm, zsd := zs.Mean(), zs.StdDev()
			for i := range out {
				out[i] = math.Exp(m + sd*(out[i]-zm)/zsd)
			}
			return out
		}
		c2 := Compare(grow(trial), grow(base), Metrics["throughput"], lv)
		assert.True(t, c2.Settled(), "%s then %d more: %s", c.Text(), c.MoreLaunches, c2.Text())
	}
}

func TestHolm(t *testing.T) {
	// m = 4: 0.01 <= 0.05/4, 0.015 <= 0.05/3, 0.03 > 0.05/2 stops; NaN is not tested
	got := Holm([]float64{0.03, 0.01, math.NaN(), 0.015, 0.04}, 0.05)
	assert.Equal(t, []bool{false, true, false, true, false}, got)
	assert.Equal(t, []bool{true}, Holm([]float64{0.05}, 0.05))
	assert.Empty(t, Holm(nil, 0.05))
}

func TestValueOf(t *testing.T) {
	v := ValueOf([]float64{100, 121}, 0.95)
	assert.InDelta(t, 110, v.Center, 1e-9) // geometric mean
	assert.True(t, v.Bounded())
	one := ValueOf([]float64{100}, 0.95)
	assert.InDelta(t, 100.0, one.Center, 1e-9)
	assert.False(t, one.Bounded())
	b, err := json.Marshal(one)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"lo":null`)
	var back Value
	require.NoError(t, json.Unmarshal(b, &back))
	assert.True(t, math.IsInf(back.Hi, 1))
}

func TestComparisonJSON(t *testing.T) {
	c := Compare([]float64{120}, []float64{100, 101}, Metrics["tokens_per_s"], Level{Confidence: 0.99, Threshold: 0.05})
	b, err := json.Marshal(c)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"p":null`)
	assert.Contains(t, string(b), `"verdict_text":"undecided (one launch: estimate only)"`)
	var back Comparison
	require.NoError(t, json.Unmarshal(b, &back))
	assert.True(t, math.IsNaN(back.P))
	assert.Equal(t, c.Text(), back.Text())
}

// The median's interval must hold the true median at least as often as its
// stated confidence (order-statistic intervals are exact, so 95% nominal).
func TestMedianCICoverage(t *testing.T) {
	for _, n := range []int{8, 20} {
		const seeds = 1000
		hit := 0
		for seed := range seeds {
			r := rand.New(rand.NewPCG(uint64(seed), uint64(n)))
			e := MedianCI(normal(r, n, 100, 7))
			require.True(t, e.Bounded(), "n=%d", n)
			if e.Lo <= 100 && 100 <= e.Hi {
				hit++
			}
		}
		assert.GreaterOrEqual(t, float64(hit)/seeds, 0.935, "n=%d", n)
	}
	assert.False(t, MedianCI([]float64{3, 1, 2}).Bounded(), "benchmath needs 6 values")
}

func TestMannWhitneyFloor(t *testing.T) {
	// 3 vs 3 with every value apart: the rank test cannot go below p = 0.1
	d := MannWhitney([]float64{100, 101, 102}, []float64{124, 125, 126})
	assert.False(t, d.Significant)
	assert.InDelta(t, 0.1, d.P, 1e-9)
}

func TestDesign(t *testing.T) {
	d := AutoDesign(5, 20)
	assert.Equal(t, []int{5, 8, 12, 20}, d.Looks)
	assert.InDelta(t, 0.01, d.LookAlpha, 1e-12)
	assert.True(t, d.IsLook(8))
	assert.False(t, d.IsLook(9))
	assert.Equal(t, []int{3, 5, 8, 10}, Looks(3, 10))
	assert.Equal(t, []int{5}, Looks(5, 5))
	f := FixedDesign(3, true)
	assert.InDelta(t, 0.95, f.Level(0.05).Confidence, 1e-12)
}

// TestDecideAgreesWithCompare: the schedule's fast verdict is compare's.
func TestDecideAgreesWithCompare(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	for range 2000 {
		nx, ny := 2+r.IntN(10), 2+r.IntN(10)
		eff, sx, sy := 0.15*r.NormFloat64(), 0.05*r.Float64(), 0.05*r.Float64()
		x, y := normal(r, nx, 0, sx), normal(r, ny, 0, sy)
		for i := range x {
			x[i] = 100 * math.Exp(eff+x[i])
		}
		for i := range y {
			y[i] = 100 * math.Exp(y[i])
		}
		lv := Level{Confidence: []float64{0.95, 0.99}[r.IntN(2)], Threshold: []float64{0, 0.05}[r.IntN(2)]}
		c := Compare(x, y, throughputMetric, lv)
		v, p := decide(x, y, lv)
		assert.Equal(t, c.Verdict, v, c.Text())
		assert.Equal(t, c.Practical, p, c.Text())
	}
}
