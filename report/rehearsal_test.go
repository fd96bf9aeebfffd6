package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/store"
)

// rehearsalRank is one rank's record: its losses, peak memory and checksum.
func rehearsalRank(rank int, hash string, losses []float64, peak int64, pipe *engine.PipelineInfo, precision string) store.RankRecord {
	r := store.RankRecord{Rank: rank, Checksum: &engine.Checksum{Hash: hash},
		Info: &engine.Info{Description: engine.Description{Family: "gpt"}, Precision: precision, MemAfterSetup: 1 << 30, Pipeline: pipe}}
	for i, l := range losses {
		r.Steps = append(r.Steps, engine.StepMetrics{Step: i, Loss: l, StepMS: 10, MemPeakBytes: peak, MemReservedBytes: peak + 1<<29,
			Buckets: []engine.BucketMetrics{{Op: "all_reduce", Bytes: 1 << 20}, {Op: "all_reduce", Bytes: 25 << 20}}})
	}
	return r
}

func rehearsalRun(trials ...store.TrialRecord) *store.Run {
	return &store.Run{Manifest: store.Manifest{Study: "s", RunID: "r1", Objective: store.Objective{Metric: "throughput", Goal: "max"},
		Rehearsal: &store.Rehearsal{Note: store.RehearsalNote, Backend: "gloo-staged", Device: "cuda", GPUs: []string{"0"},
			GPUMemoryBytes: 80 << 30, GPUName: "H100"}}, Trials: trials}
}

func TestBuildRehearsal(t *testing.T) {
	losses := []float64{10, 9, 8}
	ref := &store.RehearsalLaunch{Outcome: store.OK, Losses: []float64{10, 9, 8.00001}}
	dp := store.TrialRecord{ID: "dp", Index: 0, Outcome: store.OK, FailedRank: -1,
		Knobs: map[string]string{"ddp.compression": "none"},
		Rehearsal: &store.RehearsalTrial{Ranks: 2, DataPar: 2, Stages: 1, MicroBatch: 4, Reference: ref,
			EstimateModel: &store.RankMemoryModel{StaticBytes: 4 << 30, PerSampleBytes: 1 << 28}},
		Repeats: []store.RepeatRecord{{Outcome: store.OK, Ranks: []store.RankRecord{
			rehearsalRank(0, "a", losses, 5<<30, nil, "fp32"), rehearsalRank(1, "a", losses, 6<<30, nil, "fp32")}}}}
	bad := dp
	bad.ID, bad.Index = "bad", 1
	bad.Repeats = []store.RepeatRecord{{Outcome: store.OK, Ranks: []store.RankRecord{
		rehearsalRank(0, "a", losses, 5<<30, nil, "fp32"), rehearsalRank(1, "b", []float64{10, 9.5, 9}, 5<<30, nil, "fp32")}}}
	p0 := &engine.PipelineInfo{Stages: 2, Stage: 0, Schedule: "gpipe", Balance: []int{2, 2}, FirstLayer: 0, LastLayer: 2}
	p1 := &engine.PipelineInfo{Stages: 2, Stage: 1, Schedule: "gpipe", Balance: []int{2, 2}, FirstLayer: 2, LastLayer: 4}
	noise := &store.RehearsalLaunch{Outcome: store.OK, Losses: []float64{10.01, 9, 8}}
	pp := store.TrialRecord{ID: "pp", Index: 2, Outcome: store.OK, FailedRank: -1,
		Knobs: map[string]string{"pipeline.microbatches": "4"},
		Rehearsal: &store.RehearsalTrial{Ranks: 4, DataPar: 2, Stages: 2, MicroBatch: 2,
			Reference: &store.RehearsalLaunch{Outcome: store.OK, Losses: []float64{10, 9.001, 8}}, NoiseReference: noise,
			Faults: []store.RehearsalFault{{Kind: "crash", Rank: 3, Outcome: store.Crashed, FailedRank: 3, Expected: store.Crashed, Classified: true}}},
		Repeats: []store.RepeatRecord{{Outcome: store.OK, Ranks: []store.RankRecord{
			rehearsalRank(0, "s0", losses, 1<<30, p0, "bf16"), rehearsalRank(1, "s1", losses, 1<<30, p1, "bf16"),
			rehearsalRank(2, "s0", losses, 1<<30, p0, "bf16"), rehearsalRank(3, "s1x", losses, 1<<30, p1, "bf16")}}}}
	failed := store.TrialRecord{ID: "oom", Index: 3, Outcome: store.OOM, FailedRank: 1, Error: "CUDA out of memory\nmore",
		Rehearsal: &store.RehearsalTrial{Ranks: 8, DataPar: 8, Stages: 1, MicroBatch: 64}}

	s := Build(rehearsalRun(dp, bad, pp, failed), nil)
	assert.Equal(t, KindRehearsal, s.Kind)
	assert.Equal(t, HeadlineRehearsal, s.Headline.Status)
	assert.Contains(t, s.Headline.Text, store.RehearsalNote)
	assert.Contains(t, s.Headline.Text, "3 of 4 trials ran; 2 disagree")
	require.NotNil(t, s.Rehearsal)
	require.Len(t, s.Rehearsal.Trials, 4)
	got := map[string]RehearsalTrial{}
	for _, rt := range s.Rehearsal.Trials {
		got[rt.ID] = rt
	}

	g := got["dp"]
	require.NotNil(t, g.Checksums.DataParallelEqual)
	assert.True(t, *g.Checksums.DataParallelEqual)
	require.NotNil(t, g.Losses.Agree, g.Losses.Detail)
	assert.True(t, *g.Losses.Agree, g.Losses.Detail)
	assert.Equal(t, RehearsalFP32Tol, g.Losses.Tolerance)
	assert.Contains(t, g.Losses.Detail, "largest relative difference 1.2e-06", "the difference is relative: so labelled")
	assert.Equal(t, int64(6<<30), g.Memory.PeakBytes)
	assert.Equal(t, 1, g.Memory.PeakRank)
	require.NotNil(t, g.Memory.Fits)
	assert.True(t, *g.Memory.Fits)
	// The plan's static 4 GiB kept, its 0.25 GiB a sample scaled to 0.5 so
	// that it meets the 6 GiB peak at micro-batch 4: within 90% of 80 GiB
	// less the process's 0.5, (72 - 0.5 - 4) / 0.5 = 135; the plan's model
	// alone (72 - 0.5 - 4) / 0.25 = 270.
	assert.Equal(t, 135, g.Memory.LargestMicroBatch)
	assert.Equal(t, 270, g.Memory.PlanLargestMicroBatch)
	assert.Contains(t, g.Memory.Method, "scaled x2.00")
	assert.Equal(t, 2, g.Buckets.Count)
	assert.Equal(t, int64(1<<20), g.Buckets.FirstBytes)

	b := got["bad"]
	assert.False(t, *b.Checksums.DataParallelEqual)
	assert.Contains(t, b.Checksums.Detail, "rank 1's parameters differ")
	assert.False(t, *b.Losses.Agree)

	p := got["pp"]
	require.NotNil(t, p.Pipeline)
	assert.Equal(t, []string{"stage 0: layers 0-1", "stage 1: layers 2-3"}, p.Pipeline.Stages)
	assert.Equal(t, 4, p.Pipeline.Microbatches)
	require.NotNil(t, p.Checksums.ReplicasEqual)
	assert.False(t, *p.Checksums.ReplicasEqual)
	assert.Contains(t, p.Checksums.Detail, "stage 1: replica 1 (rank 3)")
	// bf16: twice the measured noise (1e-3 between the bf16 and fp32 references).
	assert.InDelta(t, 2e-3, p.Losses.Tolerance, 1e-5)
	assert.True(t, *p.Losses.Agree, p.Losses.Detail)
	assert.Contains(t, p.Paths, "pipeline stage exchanges")

	f := got["oom"]
	assert.Equal(t, "oom on rank 1: CUDA out of memory", f.Error)
	assert.Nil(t, f.Checksums)

	var md, html bytes.Buffer
	require.NoError(t, Render(&md, s, "md"))
	require.NoError(t, Render(&html, s, "html"))
	for _, out := range []string{md.String(), html.String()} {
		assert.Contains(t, strings.ToLower(out), store.RehearsalNote)
		assert.Contains(t, out, "never enters verdicts, baselines, history or compare")
		assert.Contains(t, out, "DISAGREE")
		assert.Contains(t, out, "as a cluster run would")
	}
	var lines bytes.Buffer
	require.NoError(t, WriteRehearsalLines(&lines, s))
	assert.Contains(t, lines.String(), "1/1 classified")
}

// TestRehearsalNeverCompared: a rehearsal's summary.json is refused by
// compare (ReadSummary) and its run directory by LoadSide; history skips it.
func TestRehearsalNeverCompared(t *testing.T) {
	dir := t.TempDir()
	s := Build(rehearsalRun(), nil)
	var buf bytes.Buffer
	require.NoError(t, WriteJSON(&buf, s))
	path := filepath.Join(dir, "summary.json")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	_, err := ReadSummary(path)
	assert.ErrorContains(t, err, "is the summary of a rehearsal")
}

// TestRehearsalLossesSameSteps: the losses are compared step for step only
// when the one-rank runs measured the same steps as the trial (the first
// H100 rehearsal's references ran warm-ups of other lengths): other steps
// fail the check instead of passing or failing it on numbers that do not
// match; the bf16 tolerance comes from the fp32 run's measured gap.
func TestRehearsalLossesSameSteps(t *testing.T) {
	losses := []float64{10, 9, 8}
	ranks := []store.RankRecord{rehearsalRank(0, "a", losses, 1<<30, nil, "bf16"), rehearsalRank(1, "a", losses, 1<<30, nil, "bf16")}
	info := func(refSteps, noiseSteps []int) *store.RehearsalTrial {
		return &store.RehearsalTrial{Ranks: 2, DataPar: 2, Stages: 1,
			Reference:      &store.RehearsalLaunch{Outcome: store.OK, Losses: []float64{10, 9.0009, 8}, Steps: refSteps},
			NoiseReference: &store.RehearsalLaunch{Outcome: store.OK, Losses: []float64{10.001, 9, 8}, Steps: noiseSteps}}
	}
	l := rehearsalLosses(ranks, info([]int{0, 1, 2}, []int{0, 1, 2}), map[string]string{}, 2)
	require.NotNil(t, l.Agree)
	assert.True(t, *l.Agree, l.Detail)
	assert.InDelta(t, 2*0.001/10, l.Tolerance, 1e-12, "twice the measured bf16-vs-fp32 gap")

	l = rehearsalLosses(ranks, info([]int{20, 21, 22}, []int{0, 1, 2}), map[string]string{}, 2)
	require.NotNil(t, l.Agree)
	assert.False(t, *l.Agree)
	assert.Contains(t, l.Detail, "not comparable")
	assert.Contains(t, l.Detail, "step 20")

	l = rehearsalLosses(ranks, info([]int{0, 1, 2}, []int{5, 6, 7}), map[string]string{}, 2)
	require.NotNil(t, l.Agree)
	assert.False(t, *l.Agree)
	assert.Contains(t, l.Detail, "bf16 noise is not measured")

	// Tighter than the measured noise: outside the tolerance.
	tight := info([]int{0, 1, 2}, []int{0, 1, 2})
	tight.Reference.Losses = []float64{10.001, 9, 8}
	tight.NoiseReference.Losses = []float64{10.001, 9, 8}
	l = rehearsalLosses(ranks, tight, map[string]string{}, 2)
	require.NotNil(t, l.Agree)
	assert.False(t, *l.Agree, "%s (tolerance %g)", l.Detail, l.Tolerance)
}

// TestRehearsalCountsEveryPlannedTrial: the counts are over every planned
// trial, and the trials without a rehearsal of their own (covered by
// another's, refused at plan time, or without a record) are listed with
// their recorded reasons, identical reasons once, in Markdown, HTML and the
// lines of casestudy run alike.
func TestRehearsalCountsEveryPlannedTrial(t *testing.T) {
	losses := []float64{10, 9, 8}
	ok := store.TrialRecord{ID: "aaaa0001", Index: 0, Outcome: store.OK, FailedRank: -1, Changed: []string{"ddp.bucket_mb"},
		Rehearsal: &store.RehearsalTrial{Ranks: 2, DataPar: 2, Stages: 1, MicroBatch: 4,
			Reference: &store.RehearsalLaunch{Outcome: store.OK, Losses: losses}},
		Repeats: []store.RepeatRecord{{Outcome: store.OK, Ranks: []store.RankRecord{
			rehearsalRank(0, "a", losses, 1<<30, nil, "fp32"), rehearsalRank(1, "a", losses, 1<<30, nil, "fp32")}}}}
	covered := func(id string, i int) store.TrialRecord {
		return store.TrialRecord{ID: id, Index: i, Outcome: store.Skipped, FailedRank: -1, Changed: []string{"ddp.overlap"},
			Error: "covered by the rehearsal of trial aaaa0001: the same layout and paths (ranks 2, dp 2 x pp 1, micro-batch 4)"}
	}
	refused := func(id string, i int, changed []string) store.TrialRecord {
		return store.TrialRecord{ID: id, Index: i, Outcome: store.Skipped, FailedRank: -1, Changed: changed,
			Error: "refused at plan time, not rehearsed: trial " + id + " (8 ranks: data parallel 8 x 1 stages, micro-batch 32): " +
				"8 ranks share one GPU, about 9.4 GiB each (estimate), 75.6 GiB in all against 71.7 GiB of one H100's memory"}
	}
	run := rehearsalRun(ok, covered("aaaa0002", 1), covered("aaaa0003", 2), refused("bbbb0001", 3, []string{}),
		refused("bbbb0002", 4, []string{"zero.stage"}))
	for i, id := range []string{"aaaa0001", "aaaa0002", "aaaa0003", "bbbb0001", "bbbb0002", "cccc0001"} {
		run.Manifest.Plan = append(run.Manifest.Plan, store.PlannedTrial{ID: id, Index: i, Changed: []string{"x"}})
	}
	s := Build(run, nil)
	assert.Contains(t, s.Headline.Text, "1 of 6 trials ran")
	assert.Equal(t, 1, s.Counts[string(NotRun)])
	require.Len(t, s.Rehearsal.NotRehearsed, 3)
	g := s.Rehearsal.NotRehearsed
	assert.Equal(t, []string{"aaaa0002", "aaaa0003"}, g[0].Trials)
	assert.Equal(t, []string{"bbbb0001", "bbbb0002"}, g[1].Trials)
	assert.Equal(t, "bbbb0001", g[1].Baseline)
	assert.Equal(t, "refused at plan time, not rehearsed: each trial (8 ranks: data parallel 8 x 1 stages, micro-batch 32): "+
		"8 ranks share one GPU, about 9.4 GiB each (estimate), 75.6 GiB in all against 71.7 GiB of one H100's memory", g[1].Reason)
	assert.Equal(t, NotRun, g[2].Outcome)
	assert.Equal(t, []string{"cccc0001"}, g[2].Trials)

	var md, html, lines bytes.Buffer
	require.NoError(t, Render(&md, s, "md"))
	require.NoError(t, Render(&html, s, "html"))
	require.NoError(t, WriteRehearsalLines(&lines, s))
	assert.Contains(t, md.String(), "1 of 6 trials ran")
	assert.Contains(t, md.String(), "### Not rehearsed: 5 of 6 trials")
	assert.Contains(t, md.String(), "- **2 skipped**: aaaa0002, aaaa0003: covered by the rehearsal of trial aaaa0001: the same layout and paths")
	assert.Contains(t, md.String(), "- **2 skipped**: bbbb0001 (baseline), bbbb0002: refused at plan time, not rehearsed: each trial (8 ranks")
	assert.Contains(t, md.String(), "- **1 not run**: cccc0001: no record in trials.jsonl: the rehearsal stopped before this trial")
	assert.Equal(t, 1, strings.Count(md.String(), "75.6 GiB in all against 71.7 GiB"), "identical reasons once")
	h := html.String()
	assert.Contains(t, h, "1 of 6 trials ran")
	assert.Contains(t, h, "Not rehearsed: 5 of 6 trials")
	assert.Contains(t, h, "<td>2 skipped</td><td>bbbb0001 (baseline), bbbb0002: refused at plan time, not rehearsed: each trial (8 ranks")
	assert.Contains(t, h, "covered by the rehearsal of trial aaaa0001")
	assert.Contains(t, h, "<td>1 not run</td><td>cccc0001: no record in trials.jsonl")
	assert.Contains(t, lines.String(), "1 of 6 trials ran")
	assert.Contains(t, lines.String(), "not rehearsed, 2 skipped: bbbb0001 (baseline), bbbb0002: refused at plan time")
}

// TestRehearsalMemoryReason: a trial without an allocator peak says why:
// it did not finish (its outcome); the CUDA-only reason is for a finished
// trial on CPU ranks alone.
func TestRehearsalMemoryReason(t *testing.T) {
	noSteps := []store.RankRecord{{Rank: 0, Info: &engine.Info{Device: "cuda"}}, {Rank: 1, Info: &engine.Info{Device: "cuda"}}}
	rh := &store.Rehearsal{Device: "cuda", GPUMemoryBytes: 80 << 30}
	m := rehearsalMemory(noSteps, &store.RehearsalTrial{}, rh, store.Interrupted)
	assert.Equal(t, "no memory statistics: the trial did not finish (interrupted)", m.Method)

	cpu := rehearsalRank(0, "a", []float64{10, 9}, 0, nil, "fp32")
	cpu.Info.Device = "cpu"
	m = rehearsalMemory([]store.RankRecord{cpu}, &store.RehearsalTrial{}, &store.Rehearsal{Device: "cpu"}, store.OK)
	assert.Equal(t, "no memory statistics: the ranks ran on CPU, and the engine reports allocator peaks on CUDA devices only", m.Method)

	gpu := rehearsalRank(0, "a", []float64{10, 9}, 0, nil, "fp32")
	gpu.Info.Device = "cuda"
	m = rehearsalMemory([]store.RankRecord{gpu}, &store.RehearsalTrial{}, rh, store.OK)
	assert.Equal(t, "no memory statistics: no rank recorded an allocator peak", m.Method)

	// Through Build and the renderer: an interrupted trial on a GPU.
	rec := store.TrialRecord{ID: "int", Outcome: store.Interrupted, FailedRank: -1, Error: "stopped by a signal",
		Rehearsal: &store.RehearsalTrial{Ranks: 2, DataPar: 2, Stages: 1, MicroBatch: 32, EstimateBytes: 7 << 30},
		Repeats:   []store.RepeatRecord{{Outcome: store.Interrupted, Ranks: noSteps}}}
	s := Build(rehearsalRun(rec), nil)
	var md bytes.Buffer
	require.NoError(t, Render(&md, s, "md"))
	assert.Contains(t, md.String(), "- **memory per rank**: no memory statistics: the trial did not finish (interrupted); plan-time estimate 7.00 GiB")
	assert.NotContains(t, md.String(), "CUDA devices only")
}
