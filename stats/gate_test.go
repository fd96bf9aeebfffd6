package stats

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/stats/synth"
)

// night draws one run of the study: every trial's launches, with a shared
// offset of the night (sd nightSD on ln throughput) and a factor per trial.
func night(r *rand.Rand, models []synth.Model, factor []float64, n int, nightSD float64) [][]float64 {
	shift := math.Exp(nightSD * r.NormFloat64())
	out := make([][]float64, len(models))
	for i, m := range models {
		out[i] = m.Scaled(shift*factor[i]).Launches(r, n)
	}
	return out
}

// gateNight is compare's gate on one simulated night: OLD and NEW with n
// launches a trial, and hist earlier runs (n launches each) as history.
func gateNight(r *rand.Rand, models []synth.Model, drop []float64, n, hist int, nightSD float64) GateResult {
	ones := make([]float64, len(models))
	for i := range ones {
		ones[i] = 1
	}
	var history [][][]float64
	for range hist {
		history = append(history, night(r, models, ones, n, nightSD))
	}
	old, cur := night(r, models, ones, n, nightSD), night(r, models, drop, n, nightSD)
	in := make([]GateInput, len(models))
	for i := range models {
		in[i] = GateInput{Name: strconv.Itoa(i), Old: old[i], New: cur[i], OldSide: SideClean, NewSide: SideClean}
		for _, h := range history {
			in[i].History = append(in[i].History, h[i])
		}
	}
	return Gate(in, throughputMetric, 0.05)
}

// TestSimulatedGateNights: the gate of casestudy compare over a 10-trial
// study at the H100's noise (synth.H100), 300 nights per cell:
//   - a 10% drop of one trial at 3 launches a side fails (exit 1) in >= 95%
//     of nights, and so it does at one launch a side with 5 earlier runs;
//   - an A/A night passes (exit 0) in >= 95% of nights with history, at one
//     launch and at three, with a night-to-night sd of 0.5%;
//   - at one launch a side without history it is always inconclusive;
//   - with a night-to-night sd of 2%, history keeps false alarms at <= 5%.
func TestSimulatedGateNights(t *testing.T) {
	const trials = 10
	models := make([]synth.Model, trials)
	for i := range models {
		models[i] = synth.H100.Scaled(1 + 0.1*float64(i))
	}
	same := make([]float64, trials)
	for i := range same {
		same[i] = 1
	}
	drop := append([]float64(nil), same...)
	drop[7] = 0.9
	n := reps(300)
	cells := []struct {
		name              string
		factor            []float64
		launches, history int
		nightSD           float64
		want              string
		atLeast           float64
	}{
		{"10% drop, 3 launches", drop, 3, 0, 0, GateFailed, 0.95},
		{"10% drop, 1 launch, 5 earlier runs", drop, 1, 5, 0.005, GateFailed, 0.95},
		{"A/A, 1 launch, 8 earlier runs", same, 1, 8, 0.005, GatePassed, 0.95},
		{"A/A, 3 launches, 8 earlier runs", same, 3, 8, 0.005, GatePassed, 0.95},
		{"A/A, 3 launches, no history", same, 3, 0, 0, GatePassed, 0.95},
		{"A/A, 1 launch, no history", same, 1, 0, 0, GateInconclusive, 1},
		{"10% drop, 1 launch, no history", drop, 1, 0, 0, GateInconclusive, 1},
	}
	for ci, c := range cells {
		r := rand.New(rand.NewPCG(21, uint64(ci)))
		got := map[string]int{}
		for range n {
			res := gateNight(r, models, c.factor, c.launches, c.history, c.nightSD)
			got[res.Outcome]++
			if c.want == GateFailed && res.Outcome == GateFailed {
				assert.Equal(t, GateRegression, res.Rows[7].State, "only the dropped trial: %s", res.Line)
			}
		}
		share := float64(got[c.want]) / float64(n)
		t.Logf("gate, %-36s: fail %5.1f%%, inconclusive %5.1f%%, pass %5.1f%%", c.name, 100*float64(got[GateFailed])/float64(n),
			100*float64(got[GateInconclusive])/float64(n), 100*float64(got[GatePassed])/float64(n))
		assert.GreaterOrEqual(t, share, c.atLeast, c.name)
	}
	// night-to-night variance: without history the launch-level test reads it as regressions
	r := rand.New(rand.NewPCG(22, 0))
	alarms := map[bool]int{}
	for range n {
		for _, hist := range []int{0, 8} {
			if gateNight(r, models, same, 5, hist, 0.02).Outcome == GateFailed {
				alarms[hist > 0]++
			}
		}
	}
	t.Logf("gate, A/A, 5 launches, night sd 2%%: false alarms %.1f%% without history, %.1f%% with 8 earlier runs",
		100*float64(alarms[false])/float64(n), 100*float64(alarms[true])/float64(n))
	assert.LessOrEqual(t, float64(alarms[true])/float64(n), 0.05)
}

// TestGateRows: the rows on constructed launches, and the summary line.
func TestGateRows(t *testing.T) {
	in := []GateInput{
		{Name: "micro_batch=32 (aa)", Old: []float64{100, 100.2, 99.8}, New: []float64{90, 90.1, 89.9}, OldSide: SideClean, NewSide: SideClean},
		{Name: "baseline (bb)", Old: []float64{100, 100.2, 99.8}, New: []float64{97, 97.1, 96.9}, OldSide: SideClean, NewSide: SideClean},
		{Name: "fp32 (cc)", Old: []float64{100}, New: []float64{67}, OldSide: SideClean, NewSide: SideClean},
		{Name: "tf32 (dd)", Old: []float64{100, 101}, New: nil, OldSide: SideClean, NewSide: SideFailed},
		{Name: "noisy (ee)", Old: []float64{100, 110, 90}, New: []float64{96, 106, 86}, OldSide: SideClean, NewSide: SideClean},
	}
	res := Gate(in, throughputMetric, 0.05)
	states := []GateState{GateRegression, GatePass, GateSuspected, GateRegression, GateUndecided}
	for i, s := range states {
		assert.Equal(t, s, res.Rows[i].State, "%s: %s", in[i].Name, res.Rows[i].Text)
	}
	assert.Equal(t, GateFailed, res.Outcome)
	assert.Contains(t, res.Rows[0].Text, "REGRESSION: 0.900×")
	assert.Contains(t, res.Rows[1].Text, "no regression beyond 5% (slower by 2.")
	assert.Contains(t, res.Rows[2].Text, "suspected regression: 0.670× (one launch a side: no interval)")
	assert.Contains(t, res.Line, "REGRESSION: 2 trials slower by more than 5% or failing: micro_batch=32 (aa) 0.900×, tf32 (dd) fails now")
	assert.Contains(t, res.Line, "1 trial slower by 2.")
	assert.Contains(t, res.Line, "baseline (bb)")

	// without the regressions: inconclusive, naming the suspects
	res = Gate(in[1:3], throughputMetric, 0.05)
	assert.Equal(t, GateInconclusive, res.Outcome)
	assert.Contains(t, res.Line, "INCONCLUSIVE: 1 of 2 trials could not be judged; suspected regressions: fp32 (cc) 0.670×")
	// all clear: pass
	res = Gate(in[1:2], throughputMetric, 0.05)
	assert.Equal(t, GatePassed, res.Outcome)
	assert.Contains(t, res.Line, "PASS: no trial slower by more than 5% (95% one-sided, Holm over 1); 1 trial slower by")

	// 2 launches a side says so
	res = Gate([]GateInput{{Name: "x", Old: []float64{100, 100.1}, New: []float64{100, 100.2}, OldSide: SideClean, NewSide: SideClean}}, throughputMetric, 0.05)
	assert.Contains(t, res.Rows[0].Method, "2 launches a side: spread from 2 degrees of freedom")

	// history makes one launch a side decidable
	hist := [][]float64{{100}, {100.3}, {99.8}, {100.1}, {99.9}}
	res = Gate([]GateInput{{Name: "x", Old: []float64{100}, New: []float64{99.9}, OldSide: SideClean, NewSide: SideClean, History: hist}}, throughputMetric, 0.05)
	assert.Equal(t, GatePass, res.Rows[0].State, res.Rows[0].Text)
	assert.Equal(t, 5, res.Rows[0].HistoryRuns)
	res = Gate([]GateInput{{Name: "x", Old: []float64{100}, New: []float64{99.9}, OldSide: SideClean, NewSide: SideClean, History: hist[:4]}}, throughputMetric, 0.05)
	assert.Equal(t, GateUndecided, res.Rows[0].State)
	assert.Contains(t, res.Rows[0].Method, "4 earlier runs hold this trial, 5 needed")

	// JSON: missing numbers are null and read back
	b, err := json.Marshal(Gate(in[2:3], throughputMetric, 0.05))
	require.NoError(t, err)
	assert.Contains(t, string(b), `"lo":null`)
	var back GateResult
	require.NoError(t, json.Unmarshal(b, &back))
	assert.True(t, math.IsNaN(back.Rows[0].Lo))
}

// TestGateNeedsABaseline: the gate passes only on rows it tested. A trial
// that finished in OLD with no clean launch (every launch tainted) has
// nothing to judge NEW against: undecided, and the run inconclusive, even
// with NEW at half of anything plausible (it passed, "Holm over 0", before).
// A run whose common trials all failed in OLD tested nothing: inconclusive
// too. A trial that failed in OLD beside a tested one is still not judged
// and does not hold the run back.
func TestGateNeedsABaseline(t *testing.T) {
	clean := GateInput{Name: "baseline (aa)", Old: []float64{100, 100.2, 99.8}, New: []float64{100.1, 99.9, 100}, OldSide: SideClean, NewSide: SideClean}
	tainted := GateInput{Name: "micro_batch=32 (bb)", New: []float64{50, 51, 49}, OldSide: SideTainted, NewSide: SideClean}
	failedBefore := GateInput{Name: "fp16 (cc)", New: []float64{100, 101, 99}, NewSide: SideClean}

	res := Gate([]GateInput{tainted}, throughputMetric, 0.05)
	assert.Equal(t, GateInconclusive, res.Outcome, res.Line)
	assert.Equal(t, GateUndecided, res.Rows[0].State)
	assert.Contains(t, res.Rows[0].Text, "undecided: finished in OLD without a clean launch")
	assert.Contains(t, res.Line, "INCONCLUSIVE: 1 of 1 trial could not be judged; no clean launch in OLD: micro_batch=32 (bb). Compare against a run whose launches")
	assert.NotContains(t, res.Line, "more launches a side", "more launches in NEW would not help")

	res = Gate([]GateInput{clean, tainted}, throughputMetric, 0.05)
	assert.Equal(t, GateInconclusive, res.Outcome, res.Line)
	assert.Equal(t, GatePass, res.Rows[0].State)

	res = Gate([]GateInput{failedBefore}, throughputMetric, 0.05)
	assert.Equal(t, GateNotJudged, res.Rows[0].State)
	assert.Equal(t, GateInconclusive, res.Outcome, res.Line)
	assert.Contains(t, res.Line, "INCONCLUSIVE: no trial was tested: none of the 1 trial in both runs finished in OLD")

	res = Gate([]GateInput{clean, failedBefore}, throughputMetric, 0.05)
	assert.Equal(t, GatePassed, res.Outcome, res.Line)
	assert.Contains(t, res.Line, "Holm over 1")
}

// TestGateHistoryWithoutSpread: earlier runs that agree to the last digit
// (one run copied five times) give no prediction interval: at one launch a
// side the row is undecided (suspected below 1/(1+δ)), where the "exact
// difference" of a zero spread passed NEW 1% slower and failed it at 10%.
func TestGateHistoryWithoutSpread(t *testing.T) {
	copies := [][]float64{{100}, {100}, {100}, {100}, {100}}
	for _, c := range []struct {
		new  float64
		want GateState
	}{{99, GateUndecided}, {90, GateSuspected}} {
		res := Gate([]GateInput{{Name: "x", Old: []float64{100}, New: []float64{c.new}, OldSide: SideClean, NewSide: SideClean, History: copies}}, throughputMetric, 0.05)
		assert.Equal(t, c.want, res.Rows[0].State, res.Rows[0].Text)
		assert.Equal(t, GateInconclusive, res.Outcome, res.Line)
		assert.Contains(t, res.Rows[0].Method, "the 5 earlier runs hold the same value: no between-run spread")
	}
	// launches that vary still decide against a history without spread
	res := Gate([]GateInput{{Name: "x", Old: []float64{100, 100.2, 99.8}, New: []float64{100.1, 99.9, 100}, OldSide: SideClean, NewSide: SideClean, History: copies}}, throughputMetric, 0.05)
	assert.Equal(t, GatePass, res.Rows[0].State, res.Rows[0].Text)
}

// A trial that finished in OLD (its launches all tainted) and fails in NEW is
// a regression, as any trial that ran before and does not now.
func TestGateFailsNowAfterATaintedOld(t *testing.T) {
	in := GateInput{Name: "bf16 (dd)", OldSide: SideTainted}
	res := Gate([]GateInput{in}, throughputMetric, 0.05)
	assert.Equal(t, GateFailed, res.Outcome, res.Line)
	assert.Equal(t, "REGRESSION: finished in OLD, fails in NEW", res.Rows[0].Text)
	assert.Contains(t, res.Line, "bf16 (dd) fails now")
}
