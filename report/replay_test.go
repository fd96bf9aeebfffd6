package report

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/stats"
)

// TestReplayH200 replays a real run: GPT-2 124M on one H200, fp32/bf16 ×
// CUDA Graphs off/on, two interleaved launches of 15 measured steps each
// (results/reference/gpt124m-h200-precision-graphs, trials.jsonl and
// manifest.json committed under testdata/replay).
func TestReplayH200(t *testing.T) {
	s := Build(readFixture(t, "replay/h200-gpt-graphs"), nil)
	byID := map[string]*Trial{}
	for i := range s.Trials {
		byID[s.Trials[i].ID] = &s.Trials[i]
	}
	base, graphs, fp32 := byID["d69fcfe4"], byID["b714f9b7"], byID["278d8b33"]
	require.True(t, base.Baseline)

	// one value per launch, the runner's recorded samples/s; the trial's
	// number is their geometric mean
	assert.Equal(t, []float64{308.8902313585111, 317.99061078329044}, base.Launches.Values)
	assert.InDelta(t, math.Sqrt(308.8902313585111*317.99061078329044), base.Value.Center, 1e-9)
	assert.Equal(t, 2, base.Value.N)

	// fp32 is 3.2x slower: decided at two launches a side
	require.NotNil(t, fp32.VsBaseline)
	assert.Equal(t, stats.Worse, fp32.VsBaseline.Verdict, fp32.VsBaseline.Text())
	assert.Equal(t, "0.31× [0.26, 0.38] slower by more than 5%", fp32.VsBaseline.Text())

	// graphs: 1.15x, but the baseline's two launches differ by 3%: at 1 degree
	// of freedom the interval still holds 1, and the rank test cannot tell
	require.NotNil(t, graphs.VsBaseline)
	c := graphs.VsBaseline
	assert.Equal(t, stats.Undecided, c.Verdict)
	assert.Equal(t, "1.146× [0.953, 1.378] undecided (needs ~1 more launch)", c.Text())
	assert.InDelta(t, 0.067, c.P, 0.001)
	assert.Greater(t, c.MannWhitneyP, 0.3) // 2 vs 2: testable, if weakly

	// the headline picks graphs (the best of three) and corrects its interval
	assert.Equal(t, "b714f9b7", s.Headline.Best)
	require.NotNil(t, s.Headline.Comparison)
	assert.Equal(t, 3, s.Headline.Comparisons)
	assert.Equal(t, stats.Undecided, s.Headline.Comparison.Verdict)
	assert.Equal(t, "winner: none by more than 5%: the best, graphs=true, is 1.15× [0.66, 1.99] undecided (needs ~2 more launches) "+
		"(98.33% interval, corrected for picking the best of 3 trials; 2 vs 2 launches)", WinnerLine(s))

	// no launch was tainted; the eager bf16 baseline was still speeding up
	// after its 5 warm-up steps: both its launches are flagged (and kept)
	assert.Empty(t, s.Excluded)
	assert.Equal(t, []LaunchNote{
		{Trial: "d69fcfe4", Repeat: 0, Reason: "not steady: the last third of its steps ran -2.8% against the first third"},
		{Trial: "d69fcfe4", Repeat: 1, Reason: "not steady: the last third of its steps ran -2.1% against the first third"},
	}, s.Unsteady)
	assert.Equal(t, 2, base.Value.N, "an unsteady launch still counts")
}

// TestReplayH200Gate: the real run against itself passes compare; the same
// run with its best trial 30% slower fails it, and the slowed trial is the
// regression.
func TestReplayH200Gate(t *testing.T) {
	old := Build(readFixture(t, "replay/h200-gpt-graphs"), nil)
	c, err := Compare(old, Build(readFixture(t, "replay/h200-gpt-graphs"), nil), "old", "new", 0.05)
	require.NoError(t, err)
	assert.Empty(t, c.Regressions)

	slow := readFixture(t, "replay/h200-gpt-graphs")
	for i := range slow.Trials {
		if slow.Trials[i].ID == "b714f9b7" {
			for j := range slow.Trials[i].Repeats {
				slow.Trials[i].Repeats[j].SamplesPerS *= 0.7
			}
		}
	}
	c, err = Compare(old, Build(slow, nil), "old", "slow", 0.05)
	require.NoError(t, err)
	assert.Equal(t, []string{"b714f9b7"}, c.Regressions)
}
