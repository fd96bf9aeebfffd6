package measure

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/store"
)

// TestWindowThroughput: samples of every rank over the window's wall clock,
// lower than by summed step times when the window holds gaps between calls.
func TestWindowThroughput(t *testing.T) {
	ranks := []store.RankRecord{
		{Steps: []engine.StepMetrics{{StepMS: 10, Samples: 8, Tokens: 80}, {StepMS: 10, Samples: 8, Tokens: 80}}},
		{Steps: []engine.StepMetrics{{StepMS: 12, Samples: 8, Tokens: 80}, {StepMS: 12, Samples: 8, Tokens: 80}}},
	}
	sps, tps, ok := WindowThroughput(ranks, 25*time.Millisecond)
	assert.True(t, ok)
	assert.InDelta(t, 32/0.025, sps, 1e-9)
	assert.InDelta(t, 320/0.025, tps, 1e-9)
	bySteps, _ := Throughput(ranks)
	assert.InDelta(t, 32/0.024, bySteps, 1e-9) // the slowest rank's 24 ms
	assert.Less(t, sps, bySteps)
	_, _, ok = WindowThroughput(ranks, 0)
	assert.False(t, ok)
	_, _, ok = WindowThroughput(nil, time.Second)
	assert.False(t, ok)
}

func TestClockDeficit(t *testing.T) {
	_, _, ok := ClockDeficit(nil)
	assert.False(t, ok)
	d, p, ok := ClockDeficit(&store.Throttle{GPUs: []store.GPUThrottle{{ClockDeficit: 0.022, PowerCap: 0.85}, {ClockDeficit: 0.05, PowerCap: 0.9}}})
	assert.True(t, ok)
	assert.InDelta(t, 0.05, d, 1e-12)
	assert.InDelta(t, 0.9, p, 1e-12)
}

// TestLaunchRate: TFLOP/s on the throughput basis: rank 0's work over the
// time samples/s divides by, below the steps' own rate when the window holds
// more than the steps.
func TestLaunchRate(t *testing.T) {
	steps := []engine.StepMetrics{{StepMS: 10, Samples: 8, TFLOPS: 100}, {StepMS: 10, Samples: 8, TFLOPS: 100}}
	r := &store.RepeatRecord{Outcome: store.OK, Ranks: []store.RankRecord{{Steps: steps}}}
	tflops := func(s engine.StepMetrics) float64 { return s.TFLOPS }
	assert.InDelta(t, 100, launchRate(r, tflops), 1e-9, "no samples/s recorded: the step-time-weighted mean")
	r.SamplesPerS = 16 / 0.025 // a 25 ms window for 20 ms of steps
	assert.InDelta(t, 80, launchRate(r, tflops), 1e-9)
	assert.InDelta(t, 80, launchesRate([]store.RepeatRecord{*r, *r}, tflops), 1e-9)
}
