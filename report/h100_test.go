package report

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/store"
)

// h100 builds the summary of one of the real H100 runs of 2026-12-06
// (testdata/h100, trimmed copies; see its README).
func h100(t *testing.T, name string) *Summary {
	t.Helper()
	return Build(readFixture(t, "h100/"+name), nil)
}

// trialWith is the ok trial whose knobs hold every pair given, nil when none.
func trialWith(s *Summary, kv ...string) *Trial {
	for i := range s.Trials {
		t := &s.Trials[i]
		match := t.OK()
		for j := 0; j+1 < len(kv) && match; j += 2 {
			match = t.Knobs[kv[j]] == kv[j+1]
		}
		if match {
			return t
		}
	}
	return nil
}

// TestH100MemoryUnderGraphs: on the real BERT-large run every graphed
// trial's peak allocated is the same 5.1 GiB whatever the micro-batch (a
// replay allocates nothing); the memory the report shows is what each holds,
// strictly increasing with the micro-batch, and larger than peak allocated.
func TestH100MemoryUnderGraphs(t *testing.T) {
	s := h100(t, "bert")
	var held []int64
	for _, mb := range []string{"16", "32", "64"} {
		tr := trialWith(s, "graphs", "true", "precision", "bf16", "grad_accum", "1", "micro_batch", mb)
		require.NotNil(t, tr, "micro_batch=%s", mb)
		require.NotNil(t, tr.Memory)
		assert.Empty(t, tr.Memory.NA)
		assert.True(t, tr.Memory.Graphs)
		assert.InDelta(t, 5.11, float64(tr.MemPeakBytes)/(1<<30), 0.01, "peak allocated is flat under graphs")
		assert.Greater(t, tr.Memory.HeldBytes, tr.Memory.PeakAllocatedBytes)
		assert.Equal(t, tr.Memory.HeldBytes-tr.Memory.PeakAllocatedBytes, tr.Memory.PoolAndCacheBytes)
		require.Len(t, tr.Memory.Ranks, 1)
		held = append(held, tr.Held())
	}
	assert.Less(t, held[0], held[1])
	assert.Less(t, held[1], held[2])
	// the run's own numbers: 8.94, 12.52 and 18.40 GiB reserved
	assert.InDelta(t, 8.94, float64(held[0])/(1<<30), 0.01)
	assert.InDelta(t, 18.40, float64(held[2])/(1<<30), 0.01)

	// the table, chart and objective show the held memory
	tr := trialWith(s, "graphs", "true", "precision", "bf16", "grad_accum", "1", "micro_batch", "64")
	assert.Equal(t, "18.4 GiB", memHeldText(tr))
	assert.Contains(t, memTip(tr), "CUDA graph pool")
	c, err := memoryChart(s, okTrials(s))
	require.NoError(t, err)
	require.NotNil(t, c)
	assert.Contains(t, string(c.SVG), `data-trial="`+tr.ID+`"`)
	assert.Contains(t, string(c.SVG), "graph pool and cache")
	rec := recordOf(t, "h100/bert", tr.ID)
	v, ok := stats.Metrics["memory"].LaunchValue(&rec.Repeats[0])
	require.True(t, ok)
	assert.Equal(t, float64(tr.Held()), v, "objective: memory ranks on what a launch holds")
}

// TestMemoryUnknown: a CPU run and a graphed run without reserved bytes
// show "n/a" with the reason, never peak allocated.
func TestMemoryUnknown(t *testing.T) {
	run := readFixture(t, "h100/bert")
	var graphed, cpu *store.TrialRecord
	for i := range run.Trials {
		rec := &run.Trials[i]
		if rec.Outcome == store.OK && rec.Knobs["graphs"] == "true" && graphed == nil {
			graphed = rec
		} else if rec.Outcome == store.OK && cpu == nil {
			cpu = rec
		}
	}
	for i := range graphed.Repeats {
		for j := range graphed.Repeats[i].Ranks {
			for k := range graphed.Repeats[i].Ranks[j].Steps {
				graphed.Repeats[i].Ranks[j].Steps[k].MemReservedBytes = 0
			}
		}
	}
	for i := range cpu.Repeats {
		for j := range cpu.Repeats[i].Ranks {
			cpu.Repeats[i].Ranks[j].Info.Device = "cpu"
		}
	}
	g, c := memoryOf(graphed), memoryOf(cpu)
	assert.Equal(t, naGraphs, g.NA)
	assert.Zero(t, g.HeldBytes)
	assert.Equal(t, naCPU, c.NA)
	assert.Equal(t, "n/a (graphs: reserved not recorded)", memHeldText(&Trial{Memory: g}))
	assert.Equal(t, "n/a (CPU)", memHeldText(&Trial{Memory: c}))
}

// recordOf is one trial's record of a fixture.
func recordOf(t *testing.T, fixture, id string) *store.TrialRecord {
	t.Helper()
	run := readFixture(t, fixture)
	for i := range run.Trials {
		if run.Trials[i].ID == id {
			return &run.Trials[i]
		}
	}
	t.Fatalf("%s has no trial %s", fixture, id)
	return nil
}
