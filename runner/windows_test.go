package runner

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/timeline"
)

const windowsStudy = `name: runner-windows
model: {family: gpt, preset: tiny, micro_batch: 2, seq_len: 16}
workload: {device: cpu, ranks: 2, warmup_steps: 1, steps: 3, repeats: 1, timeout: 30s, warmup_seconds: 0.1, measure_seconds: 0.3}
baseline: {precision: fp32}
`

// TestWindowFloors: with floors on the warm-up and the measured window (in
// seconds), the step counts are minimums: both ranks run more steps, the
// same number (rank 0 decides for both), until the warm-up lasted 0.1 s
// after its first step and the measured window 0.3 s; the manifest records
// the floors. (Without floors a launch runs exactly its steps:
// TestFaultOutcomes.)
func TestWindowFloors(t *testing.T) {
	f := newFixture(t, windowsStudy)
	run, err := f.run(t, context.Background(), f.options())
	require.NoError(t, err)
	require.Len(t, run.Trials, 1)
	tr := run.Trials[0]
	require.Equal(t, store.OK, tr.Outcome, tr.Error)
	rep := tr.Repeats[0]
	require.Len(t, rep.Ranks, 2)
	r0, r1 := rep.Ranks[0], rep.Ranks[1]
	assert.Greater(t, len(r0.Steps), 3, "the measured window ran past its 3 steps")
	assert.Equal(t, len(r0.Steps), len(r1.Steps), "every rank runs the same steps")
	assert.Greater(t, r0.WarmupSteps, 1, "the warm-up ran past its 1 step")
	assert.Equal(t, r0.WarmupSteps, r1.WarmupSteps)
	// rank 0 decides on its own clock; the other ranks follow its decisions
	// (their own windows may start a call later)
	require.NotNil(t, r0.Timeline)
	assert.GreaterOrEqual(t, r0.Timeline.PhaseMS(timeline.PhaseMeasured), 300.0, "rank 0's window")
	assert.GreaterOrEqual(t, r0.Timeline.PhaseMS(timeline.PhaseWarmup), 100.0, "rank 0's warm-up")
	require.NotNil(t, r1.Timeline)
	assert.Positive(t, r1.Timeline.PhaseMS(timeline.PhaseMeasured))
	man := NewManifest("r1", f.study, f.plan, &Machine{Device: "cpu"}, nil, nil, nil)
	assert.InDelta(t, 0.1, man.Workload["warmup_seconds"], 1e-12)
	assert.InDelta(t, 0.3, man.Workload["measure_seconds"], 1e-12)
	// a study that sets no floor: none on the CPU, 2 s and 5 s on a GPU
	w := f.study.Workload
	w.WarmupSeconds, w.MeasureSeconds = -1, -1
	wu, ms := w.Windows("cpu")
	assert.Zero(t, wu+ms)
	wu, ms = w.Windows("cuda")
	assert.Equal(t, [2]float64{2, 5}, [2]float64{wu, ms})
}
