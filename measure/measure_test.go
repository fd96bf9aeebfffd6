package measure

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/store"
)

func step(ms float64, samples int) engine.StepMetrics {
	return engine.StepMetrics{StepMS: ms, Samples: samples, Tokens: 4 * samples, MFU: 0.5, MemPeakBytes: 1, MemReservedBytes: int64(ms)}
}

func TestTrialLaunches(t *testing.T) {
	rep := func(i int, outcome store.Outcome, tainted string, ms ...float64) store.RepeatRecord {
		var steps []engine.StepMetrics
		for _, m := range ms {
			steps = append(steps, step(m, 8))
		}
		r := store.RepeatRecord{Repeat: i, Outcome: outcome, Tainted: tainted, Ranks: []store.RankRecord{{Steps: steps}}}
		r.SamplesPerS, r.TokensPerS = Throughput(r.Ranks)
		return r
	}
	tr := &store.TrialRecord{Outcome: store.OK, Repeats: []store.RepeatRecord{
		rep(0, store.OK, "", 100, 100), rep(1, store.OK, "thermal throttling 3% of the window", 200, 200),
		rep(2, store.OK, "", 80, 120)}}
	l := TrialLaunches(tr, stats.Metrics["throughput"])
	assert.Equal(t, []float64{80, 80}, l.Values, "16 samples in 0.2 s each")
	assert.Equal(t, []int{0, 2}, l.Repeats)
	require.Len(t, l.Excluded, 1)
	assert.Equal(t, 1, l.Excluded[0].Repeat)
	assert.Contains(t, l.Excluded[0].Reason, "tainted: thermal")
	assert.Equal(t, 2, CleanLaunches(tr.Repeats))

	st := TrialLaunches(tr, stats.Metrics["step_time"])
	assert.Equal(t, []float64{100, 100}, st.Values)
	tok := TrialLaunches(tr, stats.Metrics["tokens_per_s"])
	assert.Equal(t, []float64{320, 320}, tok.Values)
	mem := TrialLaunches(tr, stats.Metrics["memory"])
	assert.Equal(t, []float64{100, 120}, mem.Values)
	assert.Empty(t, TrialLaunches(tr, stats.Metrics["mfu"]).Values, "no GPU named: no peak, no MFU")
}

// TestMFUAgainstOnePeak: the mfu objective measures every trial against the
// GPU's dense bf16 peak, so an fp32 trial whose engine MFU (against fp32's
// own, lower peak) is higher but whose TFLOP/s are lower ranks below the
// bf16 one, as achieved TFLOP/s and the report's MFU rank them.
func TestMFUAgainstOnePeak(t *testing.T) {
	trial := func(tflops, ownMFU float64) *store.TrialRecord {
		var reps []store.RepeatRecord
		for i := range 2 {
			steps := []engine.StepMetrics{{StepMS: 10, Samples: 8, TFLOPS: tflops, MFU: ownMFU}, {StepMS: 30, Samples: 8, TFLOPS: tflops, MFU: ownMFU}}
			reps = append(reps, store.RepeatRecord{Repeat: i, Outcome: store.OK, Ranks: []store.RankRecord{
				{Info: &engine.Info{Device: "cuda", DeviceName: "NVIDIA H200"}, Steps: steps}}})
		}
		return &store.TrialRecord{Outcome: store.OK, Repeats: reps}
	}
	bf16, fp32 := trial(400, 400/989.4), trial(60, 60/67.0)
	v := TrialLaunches(bf16, stats.Metrics["mfu"]).Values
	assert.InDeltaSlice(t, []float64{400 / 989.4, 400 / 989.4}, v, 1e-12)
	assert.InDeltaSlice(t, []float64{60 / 989.4, 60 / 989.4}, TrialLaunches(fp32, stats.Metrics["mfu"]).Values, 1e-12)
	assert.Equal(t, 1, Best([]*store.TrialRecord{fp32, bf16}, stats.Metrics["mfu"]), "bf16 does more of the one peak")
}

func TestBest(t *testing.T) {
	mk := func(outcome store.Outcome, sps ...float64) *store.TrialRecord {
		tr := &store.TrialRecord{Outcome: outcome}
		for i, v := range sps {
			tr.Repeats = append(tr.Repeats, store.RepeatRecord{Repeat: i, Outcome: store.OK, SamplesPerS: v,
				Ranks: []store.RankRecord{{Steps: []engine.StepMetrics{step(1000/v, 1)}}}})
		}
		return tr
	}
	recs := []*store.TrialRecord{mk(store.OK, 100, 100), mk(store.OOM), mk(store.OK, 150, 90), mk(store.OK, 120, 120), nil}
	assert.Equal(t, 3, Best(recs, stats.Metrics["throughput"]), "geometric mean 120 beats 116.2")
	assert.Equal(t, 3, Best(recs, stats.Metrics["step_time"]))
	assert.Equal(t, -1, Best([]*store.TrialRecord{mk(store.Failed)}, stats.Metrics["throughput"]))
	assert.Equal(t, 0, Best([]*store.TrialRecord{mk(store.OK, 100), mk(store.OK, 100)}, stats.Metrics["throughput"]), "ties keep order")
}

func TestDrift(t *testing.T) {
	rec := func(ms ...float64) *store.RepeatRecord {
		var steps []engine.StepMetrics
		for _, m := range ms {
			steps = append(steps, step(m, 1))
		}
		return &store.RepeatRecord{Ranks: []store.RankRecord{{Steps: steps}}}
	}
	d, bad := Unsteady(rec(10, 10, 10, 10, 10.05, 10.1, 10.1, 10.1, 10.1))
	assert.InDelta(t, 0.01, d, 1e-9)
	assert.False(t, bad, "1% is ordinary warming")
	d, bad = Unsteady(rec(10, 10, 10, 10, 12, 12, 12, 12, 12))
	assert.InDelta(t, 0.2, d, 1e-9)
	assert.True(t, bad, "a host slow regime")
	_, ok := Drift(rec(10, 20, 30))
	assert.False(t, ok, "too few steps to judge")
}

func TestDesignOf(t *testing.T) {
	m := &store.Manifest{Workload: map[string]any{"repeats": float64(4)}}
	assert.Equal(t, 4, DesignOf(m).Repeats)
	m.Measurement = DesignRecord(stats.AutoDesign(5, 20))
	assert.True(t, DesignOf(m).Auto)
}

// TestDesignRecordJSON: summary.json's design and manifest.json's
// measurement are written alike (the same fields, the same names).
func TestDesignRecordJSON(t *testing.T) {
	d := stats.AutoDesign(5, 20)
	d.MaxTimeS, d.OrderSeed, d.Preheat = 600, 42, true
	want, err := json.Marshal(d)
	require.NoError(t, err)
	got, err := json.Marshal(DesignRecord(d))
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(got))
	assert.Equal(t, d, DesignFromRecord(*DesignRecord(d)))
}
