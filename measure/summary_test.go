package measure

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/store"
)

func steps(ms ...float64) []engine.StepMetrics {
	out := make([]engine.StepMetrics, len(ms))
	for i, m := range ms {
		out[i] = engine.StepMetrics{Step: i, StepMS: m, Samples: 4, Tokens: 64, Loss: 10 - float64(i)}
	}
	return out
}

func TestThroughputUsesSlowestRank(t *testing.T) {
	// rank 0: 2 steps of 100 ms; rank 1: 2 steps of 150 ms (slowest: 300 ms).
	// 4 steps x 4 samples = 16 samples in 0.3 s = 53.3/s; the sum of the
	// ranks' mean per-step rates would say 40 + 26.7 = 66.7/s.
	ranks := []store.RankRecord{{Rank: 0, Steps: steps(100, 100)}, {Rank: 1, Steps: steps(150, 150)}}
	sps, tps := Throughput(ranks)
	assert.InDelta(t, 16/0.3, sps, 1e-9)
	assert.InDelta(t, 256/0.3, tps, 1e-9)
	sps, _ = Throughput(nil)
	assert.Zero(t, sps)
}

func TestSummarizeRepeat(t *testing.T) {
	rep := &store.RepeatRecord{Ranks: []store.RankRecord{
		{Rank: 0, Steps: steps(10, 10, 10, 10)},
		{Rank: 1, Steps: steps(12, 12, 12, 12)},
	}}
	s := SummarizeRepeat(rep)
	require.NotNil(t, s)
	assert.Equal(t, 10.0, s.StepMSMedian)
	assert.Zero(t, s.StepCV)
	assert.InDelta(t, 2.0/11, s.RankSpread, 1e-9) // (12-10)/median(10,12)
	assert.Nil(t, SummarizeRepeat(&store.RepeatRecord{}))
}

func TestSummarizeTrialNoisy(t *testing.T) {
	mk := func(sps float64, ms ...float64) store.RepeatRecord {
		return store.RepeatRecord{Outcome: store.OK, SamplesPerS: sps, Ranks: []store.RankRecord{{Steps: steps(ms...)}}}
	}
	quiet := SummarizeTrial([]store.RepeatRecord{mk(100, 10, 10, 10), mk(101, 10, 10, 10)}, SummaryOptions{})
	require.NotNil(t, quiet)
	assert.False(t, quiet.Noisy)
	assert.InDelta(t, math.Sqrt(100*101), quiet.SamplesPerS, 1e-9, "the geometric mean over launches")
	assert.Equal(t, 8.0, quiet.FinalLoss)

	noisySteps := SummarizeTrial([]store.RepeatRecord{mk(100, 10, 20, 10)}, SummaryOptions{})
	assert.True(t, noisySteps.Noisy, "step CV %.3f", noisySteps.StepCV)

	noisyRepeats := SummarizeTrial([]store.RepeatRecord{mk(100, 10, 10), mk(130, 10, 10)}, SummaryOptions{})
	assert.True(t, noisyRepeats.Noisy, "repeat CV %.3f", noisyRepeats.RepeatCV)
	relaxed := SummarizeTrial([]store.RepeatRecord{mk(100, 10, 10), mk(130, 10, 10)}, SummaryOptions{NoisyCV: 0.5})
	assert.False(t, relaxed.Noisy)

	failedOnly := SummarizeTrial([]store.RepeatRecord{{Outcome: store.Crashed}}, SummaryOptions{})
	assert.Nil(t, failedOnly)
}

// TestSummarizeTrialTPComm: a tensor-parallel trial's summary carries the
// median step's tensor-group communication (tp_comm_ms) beside comm_ms;
// without tensor parallelism it stays 0.
func TestSummarizeTrialTPComm(t *testing.T) {
	ss := steps(10, 11, 12)
	for i, tp := range []float64{1, 3, 2} {
		ss[i].TPCommMS, ss[i].CommMS, ss[i].ExposedCommMS = tp, tp+1, tp+1
	}
	rec := store.RepeatRecord{Outcome: store.OK, SamplesPerS: 100, Ranks: []store.RankRecord{{Steps: ss}}}
	s := SummarizeTrial([]store.RepeatRecord{rec}, SummaryOptions{})
	require.NotNil(t, s)
	assert.Equal(t, 2.0, s.TPCommMS)
	assert.Equal(t, 3.0, s.CommMS)
	plain := SummarizeTrial([]store.RepeatRecord{{Outcome: store.OK, SamplesPerS: 100,
		Ranks: []store.RankRecord{{Steps: steps(10, 11)}}}}, SummaryOptions{})
	require.NotNil(t, plain)
	assert.Zero(t, plain.TPCommMS)
	assert.Zero(t, plain.GatherWaitMS)
}

// TestSummarizeTrialGatherWait: a ZeRO trial's summary carries the median
// over its steps of the wait for the parameters' all-gathers (gather_wait_ms),
// taken field by field, not from the median step.
func TestSummarizeTrialGatherWait(t *testing.T) {
	ss := steps(10, 11, 12)
	for i, w := range []float64{0.5, 4, 2} {
		ss[i].GatherWaitMS, ss[i].ExposedCommMS = w, w+1
	}
	s := SummarizeTrial([]store.RepeatRecord{{Outcome: store.OK, SamplesPerS: 100, Ranks: []store.RankRecord{{Steps: ss}}}}, SummaryOptions{})
	require.NotNil(t, s)
	assert.Equal(t, 2.0, s.GatherWaitMS)
	assert.Equal(t, 3.0, s.ExposedCommMS)
}
