package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/casestudy/casestudy/engine"
	"github.com/casestudy/casestudy/internal/exitcode"
	"github.com/casestudy/casestudy/report"
	"github.com/casestudy/casestudy/store"
)

// writeStudy writes a study file under a fresh studies folder.
func writeRehearsalStudy(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "studies", name)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	return path
}

// TestRunRehearseCPU rehearses a tiny GPT on 4 CPU ranks through the
// host-staged backend (the code CUDA ranks sharing a GPU run, with CPU
// tensors): data parallel 2 x pipeline 2, and data parallel 4 with top-k
// compression. Every trial runs; the stage replicas
// and the DP ranks end bit-identical; the losses follow one rank training the
// same global batch within 1e-5; a killed and a stalled rank are classified
// as on a cluster; the report and summary.json say "rehearsal, not a measurement", and compare and
// baseline refuse the run.
func TestRunRehearseCPU(t *testing.T) {
	lib := engineLibOrSkip(t)
	t.Setenv(asMainEnv, "1")
	t.Setenv(engine.EnvLibrary, lib)
	path := writeRehearsalStudy(t, "rehearse.yaml", `name: rehearse-tiny
model: {family: gpt, preset: tiny, micro_batch: 2, seq_len: 32}
workload: {device: cpu, ranks: 4, warmup_steps: 1, steps: 2, timeout: 2m, threads: 1}
baseline: {pipeline.stages: 2, pipeline.microbatches: 2, pipeline.schedule: 1f1b}
sweep:
  strategy: list
  trials:
    - {pipeline.schedule: 1f1b}
    - {pipeline.stages: 1, ddp.compression: topk, ddp.topk_ratio: 0.05, ddp.first_bucket_mb: 0.05}
`)
	out := filepath.Join(filepath.Dir(path), "results")
	code, stdout, stderr := runCLI(t, "run", path, "--rehearse", "--out", out, "--kill-grace", "500ms")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, stdout, store.RehearsalNote)
	dir := onlyRunDir(t, out)

	run, err := store.ReadRun(dir)
	require.NoError(t, err)
	require.NotNil(t, run.Manifest.Rehearsal)
	assert.Equal(t, "gloo-staged", run.Manifest.Rehearsal.Backend)
	require.Len(t, run.Trials, 2)
	for _, tr := range run.Trials {
		require.Equal(t, store.OK, tr.Outcome, tr.Error)
		for _, r := range tr.Repeats[0].Ranks {
			require.NotNil(t, r.Info)
			assert.Equal(t, "gloo-staged", r.Info.Backend, "trial %s rank %d", tr.ID, r.Rank)
		}
		// The one-rank run measured the same steps as the trial (1 warm-up,
		// then steps 1 and 2), so its losses compare step for step; with one
		// stage the baseline's 2 pipeline micro-batches accumulate, in both.
		ref := tr.Rehearsal.Reference
		require.NotNil(t, ref, tr.ID)
		var steps []int
		for _, st := range tr.Repeats[0].Ranks[0].Steps {
			steps = append(steps, st.Step)
		}
		assert.Equal(t, []int{1, 2}, steps)
		assert.Equal(t, steps, ref.Steps, "trial %s: the reference's measured steps", tr.ID)
		assert.Equal(t, 2, ref.GradAccum, "trial %s: 2 micro-batches accumulated", tr.ID)
		// The plan's estimate is recorded split (static + per sample), as the
		// report's largest micro-batch calibrates it.
		rh := tr.Rehearsal
		require.NotNil(t, rh.EstimateModel, tr.ID)
		assert.InDelta(t, rh.EstimateBytes, rh.EstimateModel.At(rh.MicroBatch)+rh.ProcessBytes, 1, "trial %s", tr.ID)
	}

	raw, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	require.NoError(t, err)
	var s report.Summary
	require.NoError(t, json.Unmarshal(raw, &s))
	assert.Equal(t, report.KindRehearsal, s.Kind)
	assert.Equal(t, report.HeadlineRehearsal, s.Headline.Status)
	assert.Nil(t, s.Headline.Comparison, "a rehearsal has no verdict")
	require.NotNil(t, s.Rehearsal)
	assert.Equal(t, store.RehearsalNote, s.Rehearsal.Note)
	require.Len(t, s.Rehearsal.Trials, 2)
	byStages := map[int]report.RehearsalTrial{}
	for _, rt := range s.Rehearsal.Trials {
		byStages[rt.Stages] = rt
	}

	pp := byStages[2]
	assert.Equal(t, 2, pp.DataPar)
	require.NotNil(t, pp.Pipeline)
	assert.Equal(t, "1f1b", pp.Pipeline.Schedule)
	assert.Len(t, pp.Pipeline.Stages, 2)
	require.NotNil(t, pp.Checksums)
	require.NotNil(t, pp.Checksums.ReplicasEqual, pp.Checksums.Detail)
	assert.True(t, *pp.Checksums.ReplicasEqual, pp.Checksums.Detail)
	require.NotNil(t, pp.Losses)
	require.NotNil(t, pp.Losses.Agree, pp.Losses.Detail)
	assert.True(t, *pp.Losses.Agree, pp.Losses.Detail)
	assert.Equal(t, report.RehearsalFP32Tol, pp.Losses.Tolerance)
	require.Len(t, pp.Faults, 2, "a kill and a stall")
	for _, f := range pp.Faults {
		assert.True(t, f.Classified, "fault %s: recorded %s naming rank %d (%s)", f.Kind, f.Outcome, f.FailedRank, f.Error)
	}
	require.NotNil(t, pp.Memory)
	assert.Zero(t, pp.Memory.PeakBytes, "CPU ranks report no allocator peak")
	assert.Contains(t, pp.Memory.Method, "no memory statistics")
	assert.Positive(t, pp.Memory.EstimateBytes)

	dp := byStages[1]
	assert.Equal(t, 4, dp.DataPar)
	require.NotNil(t, dp.Checksums)
	require.NotNil(t, dp.Checksums.DataParallelEqual)
	assert.True(t, *dp.Checksums.DataParallelEqual, dp.Checksums.Detail)
	require.NotNil(t, dp.Buckets)
	assert.Greater(t, dp.Buckets.Count, 1)
	assert.Equal(t, "all_gather", dp.Buckets.Ops, "top-k all-gathers its pairs")
	assert.Equal(t, dp.Buckets.Bytes[0], dp.Buckets.FirstBytes)
	require.NotNil(t, dp.Losses)
	assert.Nil(t, dp.Losses.Agree, "top-k changes the gradients: the losses are shown, not judged")
	assert.Contains(t, dp.Losses.Detail, "compression topk changes the gradients")
	assert.Len(t, dp.Losses.Reference, 2)
	assert.Contains(t, dp.Paths, "top-k all-gather")
	assert.Empty(t, dp.Faults, "the faults run once per rehearsal, in its first multi-rank trial")
	assert.Empty(t, dp.NotApplied, "no nccl.* knob (the planner drops them on cpu; runner's TestRehearseSpec covers them)")

	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	require.NoError(t, err)
	assert.Contains(t, strings.ToLower(string(md)), store.RehearsalNote)
	assert.Contains(t, string(md), "## Rehearsal")
	assert.NotContains(t, string(md), "faster", "no verdict words in a rehearsal")
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	require.NoError(t, err)
	assert.Contains(t, string(html), store.RehearsalNote)

	// Never a measurement: compare and baseline refuse it, history skips it.
	code, _, stderr = runCLI(t, "compare", dir, dir)
	assert.Equal(t, exitcode.Input, code)
	assert.Contains(t, stderr, "is a rehearsal")
	code, _, stderr = runCLI(t, "baseline", dir, "-o", filepath.Join(t.TempDir(), "b.json"))
	assert.Equal(t, exitcode.Input, code)
	assert.Contains(t, stderr, "is a rehearsal")
	code, _, stderr = runCLI(t, "compare", filepath.Join(dir, "summary.json"), dir)
	assert.Equal(t, exitcode.Input, code)
	assert.Contains(t, stderr, "rehearsal")
	code, _, stderr = runCLI(t, "check", dir)
	assert.Equal(t, exitcode.Input, code)
	assert.Contains(t, stderr, "is a rehearsal")
	code, _, stderr = runCLI(t, "export", dir, "--format", "csv")
	assert.Equal(t, exitcode.Input, code)
	assert.Contains(t, stderr, "is a rehearsal")
	code, _, stderr = runCLI(t, "history", filepath.Dir(dir))
	assert.Equal(t, exitcode.Input, code)
	assert.Contains(t, stderr, "holds only rehearsals")
}

// TestRunRehearseRefusesWhatDoesNotFit: a rank count whose estimated memory
// cannot fit the device the ranks share is refused before any launch, with
// the number of ranks that would fit.
func TestRunRehearseRefusesWhatDoesNotFit(t *testing.T) {
	lib := engineLibOrSkip(t)
	t.Setenv(engine.EnvLibrary, lib)
	path := writeRehearsalStudy(t, "huge.yaml", `name: rehearse-huge
model: {family: gpt, preset: 1.5b, micro_batch: 8}
workload: {device: cpu, ranks: 256, rehearse: true}
`)
	out := filepath.Join(filepath.Dir(path), "results")
	code, stdout, stderr := runCLI(t, "run", path, "--out", out)
	require.Equal(t, exitcode.Environment, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, stderr, "the rehearsal does not fit this machine")
	assert.Regexp(t, `256 ranks share the host, about [0-9.]+ GiB each \(estimate\)`, stderr)
	assert.Regexp(t, `\d+ ranks per device fit \(\d+ ranks on this machine\)`, stderr)
	_, err := os.Stat(out)
	assert.True(t, os.IsNotExist(err), "nothing was launched or written")
}
