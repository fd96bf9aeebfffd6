package stats

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nights are n nightly values around 1000 with log-normal noise of cv; from
// night step (1-based) on they are scaled by factor.
func nights(seed uint64, n, step int, factor, cv float64) []float64 {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]float64, n)
	for i := range out {
		v := 1000 * math.Exp(cv*r.NormFloat64())
		if step > 0 && i+1 >= step {
			v *= factor
		}
		out[i] = v
	}
	return out
}

// TestChangePointStep: a 15% drop at night 8 of 12 (1% noise) is found at
// night 8, with its ratio, in every one of ten constructed histories, at the
// level history uses for ten trials (5%/10).
func TestChangePointStep(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		xs := nights(seed, 12, 8, 0.85, 0.01)
		cps := FindChangePoints(xs, ChangePointOptions{Alpha: 0.005, Seed: 7})
		require.Len(t, cps, 1, "seed %d: %v", seed, cps)
		assert.Equal(t, 7, cps[0].Index, "the first night after the step (night 8)")
		assert.InDelta(t, 0.85, cps[0].Ratio, 0.02)
		assert.Less(t, cps[0].P, 0.005)
	}
	// a rise is a change too
	cps := FindChangePoints(nights(3, 12, 8, 1.15, 0.01), ChangePointOptions{Seed: 7})
	require.Len(t, cps, 1)
	assert.Equal(t, 7, cps[0].Index)
}

// TestChangePointAA: nights of the same code (1% and 3% noise) have no
// change point at 5%, in twenty constructed histories each.
func TestChangePointAA(t *testing.T) {
	fired := 0
	for seed := uint64(1); seed <= 20; seed++ {
		for _, cv := range []float64{0.01, 0.03} {
			fired += len(FindChangePoints(nights(seed, 12, 0, 1, cv), ChangePointOptions{Alpha: 0.005, Seed: 7}))
		}
	}
	assert.Zero(t, fired, "A/A nights at the corrected level")
	// the uncorrected 5% test fires now and then on A/A nights, about as often as it should
	fired = 0
	for seed := uint64(1); seed <= 100; seed++ {
		if len(FindChangePoints(nights(seed, 12, 0, 1, 0.02), ChangePointOptions{Alpha: 0.05, Permutations: 199, Seed: 7})) > 0 {
			fired++
		}
	}
	assert.LessOrEqual(t, fired, 12, "false alarms out of 100 at 5%%")
}

// TestChangePointEdges: too short, non-positive values and two steps.
func TestChangePointEdges(t *testing.T) {
	assert.Empty(t, FindChangePoints([]float64{1, 2, 3, 4, 5}, ChangePointOptions{}))
	assert.Empty(t, FindChangePoints([]float64{1, 1, 1, 0, 1, 1, 1, 1}, ChangePointOptions{}))
	xs := append(nights(5, 10, 0, 1, 0.01), nights(6, 10, 1, 0.8, 0.01)...)
	xs = append(xs, nights(7, 10, 1, 1.1, 0.01)...)
	cps := FindChangePoints(xs, ChangePointOptions{Seed: 1})
	require.Len(t, cps, 2, "%v", cps)
	assert.Equal(t, 10, cps[0].Index)
	assert.Equal(t, 20, cps[1].Index)
	assert.InDelta(t, 0.8, cps[0].Ratio, 0.02)
	assert.InDelta(t, 1.1/0.8, cps[1].Ratio, 0.03)
}
