package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/checklist"
	meas "github.com/casestudy/casestudy/measure"
	"github.com/casestudy/casestudy/stats"
	"github.com/casestudy/casestudy/store"
	"github.com/casestudy/casestudy/study"
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
	v, ok := meas.LaunchValue(stats.Metrics["memory"], &rec.Repeats[0])
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

// TestH100Measured: the "What was measured" block of the real BERT run
// carries the preset, parameter count, shapes, global batch, the study's
// question, strategy, steps and launches, threshold and machine, in every
// format; the micro_batch=64 winner gets a global-batch caveat.
func TestH100Measured(t *testing.T) {
	s := h100(t, "bert")
	w := s.Measured
	require.NotNil(t, w)
	assert.Equal(t, "bert", w.Family)
	assert.Equal(t, "large", w.Preset)
	assert.Equal(t, int64(336226108), w.Params)
	assert.Equal(t, 128, w.Shapes["seq_len"])
	assert.Equal(t, 32, w.MicroBatch)
	assert.Equal(t, 32, w.GlobalBatch)
	assert.Equal(t, "What makes BERT-large pre-training fast on this machine?", w.Question)
	assert.Equal(t, "one-at-a-time", w.Strategy)
	assert.Equal(t, 5, w.Warmup)
	assert.Equal(t, 50, w.Steps)
	assert.Equal(t, 5, w.LaunchesMax)
	assert.Contains(t, w.Launches, "auto: 5 to 12")
	assert.Equal(t, 0.05, w.Threshold)
	assert.Contains(t, w.Machine, "H100")
	assert.Contains(t, w.Subtitle, "bert large (336.2M)")
	caveats := strings.Join(w.Caveats, "\n")
	assert.Contains(t, caveats, "micro_batch=64 (decided faster) changes the global batch from 32 to 64")

	for _, format := range []string{"html", "md", "json"} {
		var buf bytes.Buffer
		require.NoError(t, Render(&buf, s, format))
		out := buf.String()
		for _, want := range []string{"336.2M", "What makes BERT-large pre-training fast", "one-at-a-time", "seq_len", "global batch"} {
			assert.Contains(t, out, want, format)
		}
		head := out[:min(len(out), strings.Index(out, "global batch")+1)]
		assert.NotContains(t, head, "## Trials", "%s: the block comes before the trials", format)
	}
}

// TestH100Confirm: the decided winners of the real BERT run combine into a
// confirmation study that study.Load accepts, written next to the report.
func TestH100Confirm(t *testing.T) {
	run := readFixture(t, "h100/bert")
	dir := filepath.Join(t.TempDir(), "studies")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	paths, err := Write(run, nil, dir, []string{"json"})
	require.NoError(t, err)
	require.Contains(t, paths, filepath.Join(dir, ConfirmFile))
	s := Build(run, nil)
	c := s.Measured.Confirm
	require.NotNil(t, c)
	win := map[string]string{}
	for _, tr := range winners(s) {
		if len(tr.Changed) == 1 {
			if _, ok := win[tr.Changed[0]]; !ok {
				win[tr.Changed[0]] = tr.Knobs[tr.Changed[0]]
			}
		}
	}
	assert.Equal(t, win, c.Winners)
	assert.Equal(t, "64", c.Winners["micro_batch"])
	st, err := study.Load(filepath.Join(dir, ConfirmFile), study.LoadOptions{})
	require.NoError(t, err)
	assert.Equal(t, "bert-confirm", st.Name)
	assert.Equal(t, "list", st.Sweep.Strategy)
	assert.Contains(t, c.Trials, map[string]string{"grad_accum": "2"}, "the baseline at the winner's global batch (32 × 2 = 64)")
	if len(c.Winners) > 1 {
		assert.Equal(t, c.Winners, c.Trials[0], "the winners combined come first")
	}
}

// TestH100Launches: every launch of the real BERT run is in summary.json
// with its steps, SM clock and power, window and power-capped share; the
// HTML has the strip chart and one expandable block per launch with the
// three charts.
func TestH100Launches(t *testing.T) {
	s := h100(t, "bert")
	eager := trialWith(s, "graphs", "false")
	require.NotNil(t, eager)
	require.Len(t, eager.LaunchDetail, 5)
	capped := 0
	for _, tr := range okTrials(s) {
		for _, d := range tr.LaunchDetail {
			assert.Len(t, d.StepMS, 50, "%s launch %d", tr.ID, d.Repeat)
			assert.Len(t, d.WarmupStepMS, 5)
			assert.Len(t, d.StepT, 55)
			assert.Greater(t, d.WindowEnd, d.WindowStart)
			assert.Greater(t, d.WindowStart, 0.0)
			require.NotEmpty(t, d.GPU)
			assert.Greater(t, d.SMClockMean, 500.0)
			assert.Greater(t, d.Value, 0.0)
			for _, g := range d.GPU {
				if g.PowerCapped {
					capped++
				}
			}
		}
	}
	assert.Positive(t, capped, "the run was power-capped in some samples")
	// the eager trial's steps swing within a launch (the review: 24 to 43 ms)
	lo, hi := eager.LaunchDetail[0].StepMS[0], 0.0
	for _, d := range eager.LaunchDetail {
		for _, ms := range d.StepMS {
			lo, hi = min(lo, ms), max(hi, ms)
		}
	}
	assert.Greater(t, hi/lo, 1.3)

	var buf bytes.Buffer
	require.NoError(t, Render(&buf, s, "html"))
	h := buf.String()
	assert.Contains(t, h, `id="fig-launches"`)
	assert.Equal(t, len(okTrials(s)), strings.Count(h, `<details class="trial-launches"`))
	assert.Equal(t, 40, strings.Count(h, `<details class="launch"`))
	assert.Contains(t, h, "SM clock (red: power-capped)")
	assert.Contains(t, h, `class="mark capped"`)
	assert.Contains(t, h, `class="warmup"`)

	buf.Reset()
	require.NoError(t, Render(&buf, s, "json"))
	var back Summary
	require.NoError(t, json.Unmarshal(buf.Bytes(), &back))
	for _, tr := range back.Trials {
		if tr.ID == eager.ID {
			assert.Equal(t, eager.LaunchDetail, tr.LaunchDetail, "summary.json carries every launch")
		}
	}
}

// TestH100BreakdownUnderGraphs: the profiled BERT run splits its graphed
// trial by the kernel profile; the unprofiled run says its graphed bars are
// one replay, not split.
func TestH100BreakdownUnderGraphs(t *testing.T) {
	p := h100(t, "bert-profile")
	g := trialWith(p, "graphs", "true")
	require.NotNil(t, g)
	b := g.Breakdown
	assert.Equal(t, SplitProfile, b.Split)
	sum := b.IdleMS
	for _, k := range b.Kernels {
		sum += k.MS
	}
	assert.InDelta(t, g.StepMS.Median, sum, 1e-3, "the parts add up to the step")
	assert.Greater(t, b.kernelPart("matmul kernels"), 0.4*g.StepMS.Median)
	eager := trialWith(p, "graphs", "false")
	assert.Equal(t, SplitPhases, eager.Breakdown.Split, "eager steps keep the engine's timers")

	s := h100(t, "bert")
	graphed := trialWith(s, "graphs", "true", "micro_batch", "64")
	assert.Equal(t, SplitNone, graphed.Breakdown.Split)
	assert.Equal(t, GraphNotSplit, graphed.Breakdown.Note)
	c, err := breakdownChart(s, okTrials(s))
	require.NoError(t, err)
	assert.Equal(t, 7, strings.Count(string(c.SVG), `class="label unsplit"`), "7 of 8 trials replay a graph")
	assert.Contains(t, c.Caption, "run with --profile 3")
}

// TestMemoryObjectiveOnCPU: a CPU run with objective memory (device auto
// resolved to cpu, which validate cannot refuse) says why no trial has a
// value instead of "No trial finished: 4 ok".
func TestMemoryObjectiveOnCPU(t *testing.T) {
	run := readFixture(t, "h100/bert")
	run.Manifest.Objective = store.Objective{Metric: "memory", Goal: "min"}
	for i := range run.Trials {
		for j := range run.Trials[i].Repeats {
			for k := range run.Trials[i].Repeats[j].Ranks {
				rk := &run.Trials[i].Repeats[j].Ranks[k]
				rk.Info.Device = "cpu"
				for s := range rk.Steps {
					rk.Steps[s].MemReservedBytes, rk.Steps[s].MemPeakBytes = 0, 0
				}
			}
		}
	}
	s := Build(run, nil)
	assert.Equal(t, HeadlineNoTrials, s.Headline.Status)
	assert.Equal(t, "No trial has a value of memory: 8 trial(s) ran to the end without one "+
		"(the engine measures no device memory on the CPU: objective memory needs a GPU).", s.Headline.Text)
}

// TestH100ChecklistAdvice: on the real runs the checklist no longer
// proposes MPS for ResNet-50 at micro-batch 256, nor interleave: true where
// it is on, and memory-headroom judges the memory held.
func TestH100ChecklistAdvice(t *testing.T) {
	res := checklist.Evaluate(readFixture(t, "h100/resnet50"), checklist.Config{})
	for _, r := range res {
		switch r.RuleID {
		case "mps":
			assert.NotEqual(t, checklist.Finding, r.Status, r.Message)
		case "memory-headroom":
			assert.Contains(t, r.Message, "(reserved)", r.Message)
		}
	}
	for _, r := range checklist.Evaluate(readFixture(t, "h100/bert"), checklist.Config{}) {
		assert.NotContains(t, r.Recommendation, "workload.interleave: true spreads", "%s: interleave was on", r.RuleID)
	}
}

// TestH100TraceLinks: the profile run's trace links download the trace and
// say where to open it, relative to the run directory.
func TestH100TraceLinks(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, Render(&buf, h100(t, "bert-profile"), "html"))
	h := buf.String()
	assert.Equal(t, 2, strings.Count(h, `class="trace"`))
	assert.Contains(t, h, `href="logs/21fbe097/rank0.r0.trace.json" download`)
	assert.Contains(t, h, "ui.perfetto.dev")
}

// TestH100IntervalNote: the headline's corrected interval and the table's
// own interval for the same ratio are explained on the page.
func TestH100IntervalNote(t *testing.T) {
	s := h100(t, "bert")
	n := intervalNote(s)
	assert.Contains(t, n, "corrected for picking the best of 7 trials")
	assert.Contains(t, n, "98.75% interval")
	var buf bytes.Buffer
	require.NoError(t, Render(&buf, s, "html"))
	assert.Contains(t, buf.String(), `class="muted interval-note"`)
}

// TestH100CSVMemoryHeld: the CSV export has the memory each trial holds
// next to peak allocated.
func TestH100CSVMemoryHeld(t *testing.T) {
	s := h100(t, "bert")
	var buf bytes.Buffer
	require.NoError(t, WriteCSV(&buf, s))
	tr := trialWith(s, "graphs", "true", "micro_batch", "64")
	assert.Contains(t, buf.String(), "mem_held_bytes")
	assert.Contains(t, buf.String(), fmt.Sprintf(",%d,%d,", tr.MemPeakBytes, tr.Held()))
}
